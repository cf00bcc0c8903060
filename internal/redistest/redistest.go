// Package redistest gives tests the addresses of the shared test Redis
// servers that scripts/redis-up.sh starts (scripts/with-redis.sh and make
// test export them): BOUNCER_REDIS_ADDR, a standalone server,
// BOUNCER_REDIS_CLUSTER_ADDRS, a Cluster's nodes, and the
// BOUNCER_REDIS_SENTINEL_* variables, a master and its replica managed by
// three Sentinels (scripts/redis-sentinel.sh).
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

// Sentinel is the shared Sentinel set: its sentinels, the master set's
// name, and the ACL users of the sentinels and of the master, each with
// a password of its own.
type Sentinel struct {
	Addrs                      []string
	MasterSet                  string
	User, Password             string // the sentinels'
	MasterUser, MasterPassword string // the master's (and its replica's)
}

// SentinelSet returns the Sentinel set's addresses and users.
func SentinelSet(t testing.TB) Sentinel {
	t.Helper()
	return Sentinel{
		Addrs:          strings.Split(require(t, "BOUNCER_REDIS_SENTINEL_ADDRS"), ","),
		MasterSet:      require(t, "BOUNCER_REDIS_SENTINEL_MASTER_SET"),
		User:           require(t, "BOUNCER_REDIS_SENTINEL_USER"),
		Password:       require(t, "BOUNCER_REDIS_SENTINEL_PASSWORD"),
		MasterUser:     require(t, "BOUNCER_REDIS_SENTINEL_MASTER_USER"),
		MasterPassword: require(t, "BOUNCER_REDIS_SENTINEL_MASTER_PASSWORD"),
	}
}
