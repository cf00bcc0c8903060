package bench

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/bouncerhq/bouncer/bench/refsvc"
	"github.com/bouncerhq/bouncer/bench/rlsload"
)

// The RLS benchmarks compare rate limit services over gRPC: Bouncer's
// (`bouncer serve`), envoyproxy/ratelimit on Redis, and gubernator in
// memory, each started as a process of its own by package refsvc and
// loaded by package rlsload. The load generator shares the machine with
// the server (and Redis), as it would share it with any service it
// measures. The absolute numbers depend on the machine; every server gets
// the same load in the same run, so their ratios compare like with like.

// rlsKeys is how many distinct descriptor values BenchmarkRLS spreads its
// calls over, rlsConns how many gRPC connections carry them,
// rlsDescriptors how many descriptors one call carries, and rlsStreams
// how many calls are in flight at once.
const (
	rlsKeys  = 10_000
	rlsConns = 4
)

var (
	rlsDescriptors = []int{1, 3}
	rlsStreams     = []int{1, 64}
)

// Every server of BenchmarkRLS holds each user_id value of domain bench to
// a million calls a second, so that every call is allowed.
const (
	rlsDomain = "bench"
	rlsLimit  = 1_000_000
	rlsUnit   = "second"
)

// rlsServer is one service under BenchmarkRLS. start starts it with
// config (envoyproxy/ratelimit's format; gubernator takes its limits in
// each request instead) and stops it when tb ends; it skips tb when the
// service cannot run here.
type rlsServer struct {
	name, store string
	protocol    rlsload.Protocol
	start       func(tb testing.TB, config string) *refsvc.Server
}

// rlsServers are the services of BenchmarkRLS, Bouncer's first. Add a
// service with an entry here, or run benchRLS against any server started
// with BenchmarkRLS's configuration.
//
// Bouncer runs with its default flags, as users get it: the Redis
// store's default deadline and failure policy (local). Every decision it
// made without Redis is counted (bouncer_decisions_total{result=
// "degraded"} on its admin listener) and reported as degraded next to
// the throughput; a run with any on a healthy Redis fails, not being a
// valid run. Its entries skip while the bouncer binary has no serve
// command.
var rlsServers = []rlsServer{
	{"bouncer", "memory", rlsload.RLS, func(tb testing.TB, config string) *refsvc.Server {
		return startRLS(tb, refsvc.Bouncer{Config: config, Args: []string{"--store", "memory"}}.Start)
	}},
	{"bouncer", "redis", rlsload.RLS, bouncerOnRedis()},
	{"bouncer", "redis-lease", rlsload.RLS, bouncerOnRedis("--mode", "lease")},
	{"bouncer", "redis-async", rlsload.RLS, bouncerOnRedis("--mode", "async")},
	{"envoy-ratelimit", "redis", rlsload.RLS, func(tb testing.TB, config string) *refsvc.Server {
		addrs := redisAddrs(tb, redisTopologies[0])
		return startRLS(tb, refsvc.EnvoyRatelimit{RedisAddrs: addrs, Config: config}.Start)
	}},
	// envoyproxy/ratelimit with its local cache of keys over their limit
	// on (100 MiB), the peer of the hybrid limiter's over-limit cache.
	{"envoy-ratelimit", "redis-localcache", rlsload.RLS, func(tb testing.TB, config string) *refsvc.Server {
		addrs := redisAddrs(tb, redisTopologies[0])
		return startRLS(tb, refsvc.EnvoyRatelimit{RedisAddrs: addrs, Config: config, Env: []string{"LOCAL_CACHE_SIZE_IN_BYTES=104857600"}}.Start)
	}},
	{"gubernator", "memory", rlsload.Gubernator, func(tb testing.TB, _ string) *refsvc.Server {
		if testing.Short() {
			tb.Skip("installing gubernator takes minutes on a fresh machine; run without -short")
		}
		return startRLS(tb, refsvc.Gubernator{}.Start)
	}},
}

// bouncerOnRedis starts bouncer serve on the standalone Redis with args
// besides the store: --mode lease or async, for the hybrid limiter's
// rows (store=redis-lease, store=redis-async; the configuration is
// envoyproxy/ratelimit's, whose limits name no mode).
func bouncerOnRedis(args ...string) func(testing.TB, string) *refsvc.Server {
	return func(tb testing.TB, config string) *refsvc.Server {
		addrs := redisAddrs(tb, redisTopologies[0])
		args := append([]string{"--store", "redis://" + addrs[0]}, args...)
		return startRLS(tb, refsvc.Bouncer{Config: config, Args: args}.Start)
	}
}

// startRLS runs start, stops the server it started when tb ends, and
// skips tb if start says the service does not exist yet, or, for
// gubernator, that the test was built without -tags gubernator.
func startRLS(tb testing.TB, start func(context.Context) (*refsvc.Server, error)) *refsvc.Server {
	tb.Helper()
	s, err := start(context.Background())
	if errors.Is(err, refsvc.ErrNoServe) || errors.Is(err, refsvc.ErrNoGubernator) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// startGubernatorCluster starts a gubernator cluster of n nodes, stops it
// when tb ends, and skips tb in a build without -tags gubernator.
func startGubernatorCluster(tb testing.TB, n int) []*refsvc.Server {
	tb.Helper()
	nodes, err := refsvc.Gubernator{}.StartCluster(context.Background(), n)
	if errors.Is(err, refsvc.ErrNoGubernator) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range nodes {
		tb.Cleanup(s.Stop)
	}
	return nodes
}

// BenchmarkRLS measures rate limit services over gRPC: one op is one call
// (ShouldRateLimit, or gubernator's GetRateLimits) that checks 1 or 3
// descriptors [{user_id: u<k>}] of 10 000 values, from 1 or 64 streams
// (goroutines, each one call in flight at a time) over 4 gRPC
// connections. Every server holds each value to a million a second, so
// every call must be allowed: the benchmark fails if any is denied or
// fails, if an answer carries another limit, or if the calls did not
// spread over the keys (see rlsload.Load.Run). Besides ns/op (wall time
// over b.N, all streams together) it reports:
//
//	checks/s  calls per second
//	p50-µs    median latency of one call, in microseconds
//	p99-µs    99th percentile
//	p99.9-µs  99.9th percentile
//
// Bouncer runs on memory and on the standalone Redis, where it decides
// through its hybrid limiter: strict (store=redis, the default), and with
// --mode lease and --mode async (store=redis-lease, store=redis-async).
// envoyproxy/ratelimit runs on the standalone Redis of BOUNCER_REDIS_ADDR
// (and skips without it), with its default settings besides those
// refsvc.EnvoyRatelimit.Start names; gubernator runs as one node with its
// defaults, in a build with -tags gubernator (and skips without it).
func BenchmarkRLS(b *testing.B) {
	config := refsvc.LimitConfig(rlsDomain, "user_id", rlsLimit, rlsUnit)
	for _, sv := range rlsServers {
		name := "server=" + sv.name + "/store=" + sv.store
		b.Run(name, func(b *testing.B) {
			s := sv.start(b, config)
			benchRLS(b, s, sv.protocol)
		})
	}
}

// benchRLS runs BenchmarkRLS's sub-benchmarks against the server at addr,
// started with the configuration BenchmarkRLS gives.
func benchRLS(b *testing.B, s *refsvc.Server, protocol rlsload.Protocol) {
	addr := s.Addr
	period, _ := refsvc.UnitPeriod(rlsUnit)
	for _, d := range rlsDescriptors {
		b.Run("descriptors="+strconv.Itoa(d), func(b *testing.B) {
			l, err := rlsload.New(rlsload.Config{
				Addr: addr, Protocol: protocol, Conns: rlsConns, Domain: rlsDomain,
				Keys: rlsKeys, Descriptors: d, Limit: rlsLimit, Period: period,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			// One call on each connection, so that no timed call dials.
			if _, err := l.Run(context.Background(), rlsload.Spec{Streams: rlsConns, Calls: rlsConns}); err != nil {
				b.Fatal(err)
			}
			for _, n := range rlsStreams {
				b.Run("streams="+strconv.Itoa(n), func(b *testing.B) {
					rlsRun(b, []*refsvc.Server{s}, l, n)
				})
			}
		})
	}
}

// rlsRun makes b.N calls of l from streams goroutines to servers (one,
// or the instances l spreads its calls over) and reports throughput and
// latency percentiles, and for bouncer the descriptors the servers
// decided without Redis, all together.
func rlsRun(b *testing.B, servers []*refsvc.Server, l *rlsload.Load, streams int) {
	bouncer := servers[0].Admin != ""
	degraded := func() float64 {
		var sum float64
		for _, s := range servers {
			if s.Admin == "" {
				continue
			}
			v, err := s.Metric(context.Background(), "bouncer_decisions_total", `result="degraded"`)
			if err != nil {
				b.Fatal(err)
			}
			sum += v
		}
		return sum
	}
	before := degraded()
	b.ResetTimer()
	r, err := l.Run(context.Background(), rlsload.Spec{Streams: streams, Calls: int64(b.N)})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if r.Denied > 0 || r.Failed > 0 {
		b.Fatalf("%d calls denied and %d failed (first error: %v), want all allowed", r.Denied, r.Failed, r.FirstErr)
	}
	if n := degraded() - before; n > 0 {
		b.Fatalf("%.0f descriptors decided without Redis on a healthy Redis: not a valid run", n)
	}
	if bouncer {
		b.ReportMetric(0, "degraded")
	}
	b.ReportMetric(r.PerSecond(), "checks/s")
	b.ReportMetric(micros(r.P50), "p50-µs")
	b.ReportMetric(micros(r.P99), "p99-µs")
	b.ReportMetric(micros(r.P999), "p99.9-µs")
}
