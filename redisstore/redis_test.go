package redisstore_test

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/redisstore"
)

// The tests run against the servers scripts/redis-up.sh starts (make test
// does), which internal/redistest names: addrs gives the standalone
// server's address for "BOUNCER_REDIS_ADDR" and the Cluster's nodes for
// "BOUNCER_REDIS_CLUSTER_ADDRS". Without them the tests skip, unless
// BOUNCER_REQUIRE_REDIS is set (make test sets it), when they fail.
func addrs(t testing.TB, env string) []string {
	t.Helper()
	switch env {
	case "BOUNCER_REDIS_ADDR":
		return []string{redistest.Addr(t)}
	case "BOUNCER_REDIS_CLUSTER_ADDRS":
		return redistest.ClusterAddrs(t)
	}
	t.Fatalf("addrs: %q names no test servers", env)
	return nil
}

// topologies are the Redis deployments every test of the store runs on.
var topologies = []struct {
	name string
	env  string
}{
	{"standalone", "BOUNCER_REDIS_ADDR"},
	{"cluster", "BOUNCER_REDIS_CLUSTER_ADDRS"},
}

// forEachTopology runs f as a subtest per topology, with a client of its own.
func forEachTopology(t *testing.T, f func(t *testing.T, c rueidis.Client)) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			f(t, newClient(t, addrs(t, tp.env)))
		})
	}
}

func newClient(t testing.TB, addrs []string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("connecting to %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

var prefixSeq atomic.Int64

// freshPrefix keeps every store's keys apart from earlier runs' and other
// tests'.
func freshPrefix() string {
	return fmt.Sprintf("t%d-%d", time.Now().UnixNano(), prefixSeq.Add(1))
}

// newStore makes a store on c with a generous deadline, closed with t.
func newStore(t testing.TB, c rueidis.Client, o redisstore.Options) *redisstore.Store {
	t.Helper()
	redisstore.UseClient(&o, c)
	if o.Prefix == "" {
		o.Prefix = freshPrefix()
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	s, err := redisstore.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// breakerOf is the worst of h's nodes' breakers: open, half-open, or
// closed.
func breakerOf(h redisstore.Health) string {
	worst := redisstore.BreakerClosed
	for _, n := range h.Nodes {
		switch {
		case n.Breaker == redisstore.BreakerOpen:
			worst = redisstore.BreakerOpen
		case n.Breaker == redisstore.BreakerHalfOpen && worst == redisstore.BreakerClosed:
			worst = redisstore.BreakerHalfOpen
		}
	}
	return worst
}

// opensOf is how many times the breakers of h's nodes opened, in all.
func opensOf(h redisstore.Health) uint64 {
	var n uint64
	for _, nh := range h.Nodes {
		n += nh.Opens
	}
	return n
}
