// Package redistest gives tests the addresses of the shared test Redis
// servers that scripts/redis-up.sh starts (scripts/with-redis.sh and make
// test export them): BOUNCER_REDIS_ADDR, a standalone server, and
// BOUNCER_REDIS_CLUSTER_ADDRS, a Cluster's nodes.
//
// Without them a test skips, unless BOUNCER_REQUIRE_REDIS is set (make
// test and scripts/with-redis.sh set it): then it fails, so that a
// missing server is never a silent pass.
package redistest

import (
	"os"
	"strings"
	"testing"
)

// Addr returns the standalone server's address, host:port.
func Addr(t testing.TB) string {
	t.Helper()
	return require(t, "BOUNCER_REDIS_ADDR")
}

// ClusterAddrs returns the addresses of the Cluster's nodes.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	return strings.Split(require(t, "BOUNCER_REDIS_CLUSTER_ADDRS"), ",")
}

func require(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("BOUNCER_REQUIRE_REDIS") != "" {
			t.Fatalf("%s is not set; run scripts/redis-up.sh and source .redis/env", env)
		}
		t.Skipf("%s is not set; run scripts/redis-up.sh and source .redis/env (make test does)", env)
	}
	return v
}
