package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/bouncerhq/bouncer/bench/refsvc"
	"github.com/bouncerhq/bouncer/bench/rlsload"
)

// hybridPeerInstances is how many instances of each service
// BenchmarkHybridPeers runs, and hybridPeerStreams how many calls are in
// flight at once over all of them.
const (
	hybridPeerInstances = 3
	hybridPeerStreams   = 64
)

// hybridPeer is a service under BenchmarkHybridPeers: start starts n
// instances of it that decide together, with config (envoyproxy/
// ratelimit's format; gubernator takes its limits in each request), and
// stops them when tb ends; it skips tb when the service cannot run here.
// global sets rlsload.Config.Global.
type hybridPeer struct {
	name, store string
	protocol    rlsload.Protocol
	global      bool
	start       func(tb testing.TB, config string, n int) []*refsvc.Server
}

// hybridPeers are the services of BenchmarkHybridPeers: instances that
// answer from what each holds and share their counts in the background.
var hybridPeers = []hybridPeer{
	{"bouncer", "redis-async", rlsload.RLS, false, func(tb testing.TB, config string, n int) []*refsvc.Server {
		start := bouncerOnRedis("--mode", "async")
		var servers []*refsvc.Server
		for range n {
			servers = append(servers, start(tb, config))
		}
		return servers
	}},
	{"gubernator", "memory-global", rlsload.Gubernator, true, func(tb testing.TB, _ string, n int) []*refsvc.Server {
		if testing.Short() {
			tb.Skip("installing gubernator takes minutes on a fresh machine; run without -short")
		}
		return startGubernatorCluster(tb, n)
	}},
}

// BenchmarkHybridPeers sets the hybrid limiter's async mode beside the
// peer that does the same job, in the same run: three instances of a
// rate limit service, each answering from what it holds and sharing the
// counts in the background, with BenchmarkRLS's workload (10 000 keys, a
// million calls a second each, so every call must be allowed; 1 or 3
// descriptors a call) from 64 streams, spread round-robin over the three
// (rlsload.Config.Addrs), each with 4 connections of its own:
//
//	server=bouncer/store=redis-async        three `bouncer serve --store redis://… --mode async` on the standalone Redis
//	server=gubernator/store=memory-global   a gubernator cluster of three nodes (member list), every request with behaviour GLOBAL
//
// It reports what BenchmarkRLS does, degraded being the descriptors the
// three bouncers decided without Redis (a run with any fails). Bouncer
// needs BOUNCER_REDIS_ADDR (and skips without it), gubernator a build
// with -tags gubernator and no -short.
func BenchmarkHybridPeers(b *testing.B) {
	config := refsvc.LimitConfig(rlsDomain, "user_id", rlsLimit, rlsUnit)
	period, _ := refsvc.UnitPeriod(rlsUnit)
	for _, p := range hybridPeers {
		name := "server=" + p.name + "/store=" + p.store + "/instances=" + strconv.Itoa(hybridPeerInstances)
		b.Run(name, func(b *testing.B) {
			servers := p.start(b, config, hybridPeerInstances)
			var addrs []string
			for _, s := range servers {
				addrs = append(addrs, s.Addr)
			}
			for _, d := range rlsDescriptors {
				b.Run("descriptors="+strconv.Itoa(d), func(b *testing.B) {
					l, err := rlsload.New(rlsload.Config{
						Addrs: addrs, Protocol: p.protocol, Global: p.global, Conns: rlsConns,
						Domain: rlsDomain, Keys: rlsKeys, Descriptors: d, Limit: rlsLimit, Period: period,
					})
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					// One call on each connection, so that no timed call dials.
					conns := rlsConns * len(addrs)
					if _, err := l.Run(context.Background(), rlsload.Spec{Streams: conns, Calls: int64(conns)}); err != nil {
						b.Fatal(err)
					}
					b.Run("streams="+strconv.Itoa(hybridPeerStreams), func(b *testing.B) {
						rlsRun(b, servers, l, hybridPeerStreams)
					})
				})
			}
		})
	}
}
