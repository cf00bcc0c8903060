package bench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/internal/linkproxy"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/store"
)

// regionNames are BenchmarkRegions's regions; the last is the one cut off.
var regionNames = []string{"ap", "eu", "us"}

// regionLimit is the global limit of BenchmarkRegions: with regions,
// every async fixed window is one limit for all of them.
var regionLimit = bouncer.Limit{Name: "regions", Algorithm: bouncer.FixedWindow, Rate: 300, Period: time.Second, Mode: bouncer.Async}

// regionLinkDelay is a link's delay each way: 100 ms a round trip.
const regionLinkDelay = 50 * time.Millisecond

// regionPhase is a stretch of BenchmarkRegions's windows: how the demand
// is spread over the regions in each window of it (w counts from the
// phase's first), and whether the last region is cut off meanwhile.
type regionPhase struct {
	name    string
	windows int
	weights func(w int) []float64
	cut     bool
}

func evenRegions(int) []float64   { return []float64{1.0 / 3, 1.0 / 3, 1.0 / 3} }
func skewedRegions(int) []float64 { return []float64{0.2, 0.2, 0.6} }

// movingRegions puts 80 % of the demand on one region, the next each
// window.
func movingRegions(w int) []float64 {
	ws := []float64{0.1, 0.1, 0.1}
	ws[w%3] = 0.8
	return ws
}

// regionPhases is BenchmarkRegions's run, phase by phase: under -short
// (make test's bench-check) one steady and one moving window, and no
// partition.
func regionPhases() []regionPhase {
	if testing.Short() {
		return []regionPhase{{"warm-up", 1, evenRegions, false}, {"steady", 1, evenRegions, false}, {"moving", 1, movingRegions, false}}
	}
	return []regionPhase{
		{"warm-up", 1, evenRegions, false},
		{"steady", 4, evenRegions, false},
		{"moving", 6, movingRegions, false},
		{"skewed", 2, skewedRegions, false},
		{"partition", 4, skewedRegions, true},
		{"heal", 1, skewedRegions, false},
		{"healed", 2, skewedRegions, false},
	}
}

// regionArrival is one check of BenchmarkRegions's stream: at its offset
// from the run's start, on one instance (two a region, region r's are
// 2r and 2r+1), in a window of a phase.
type regionArrival struct {
	at       time.Duration
	instance int
	window   int
	phase    string
}

// regionStream is phases' arrivals, Poisson at load times the limit's
// rate, from a generator seeded by seed.
func regionStream(phases []regionPhase, load float64, seed uint64) []regionArrival {
	rng := rand.New(rand.NewPCG(seed, 37))
	perNs := load * float64(regionLimit.Rate) / float64(regionLimit.Period)
	var s []regionArrival
	window := 0
	for _, p := range phases {
		for w := range p.windows {
			start := time.Duration(window) * regionLimit.Period
			for t := start; ; {
				t += time.Duration(rng.ExpFloat64() / perNs)
				if t >= start+regionLimit.Period {
					break
				}
				x, r, ws := rng.Float64(), 0, p.weights(w)
				for ; r < len(ws)-1 && x >= ws[r]; r++ {
					x -= ws[r]
				}
				s = append(s, regionArrival{t, 2*r + rng.IntN(2), window, p.name})
			}
			window++
		}
	}
	return s
}

// BenchmarkRegions measures how close three regions keep one global
// limit (issue 37, docs/regions.md), each region with a redis-server of
// its own (started by the benchmark on free loopback ports) and two
// instances: hybrid.New(redisstore.New(…), nil, hybrid.Options{Region,
// Peers}), each with stores of its own, all else at the defaults (real
// clock, background goroutines, the store's deadline, RegionTTL). An
// instance's peers are stores of the other regions' Redis reached
// through a linkproxy a directed link that adds 50 ms each way (100 ms a
// round trip), with the deadline the case names: peer-timeout=default,
// the store's 50 ms, which is what bouncer serve gives them (its
// --store-timeout), and peer-timeout=1s, above the round trip. The limit
// is an async fixed window of 300 a second.
//
// One op is one run of a seeded open-loop Poisson stream of checks of
// one key at three times the limit's rate, each check made on the wall
// clock at its time, spread over the regions (evenly over a region's
// instances) phase by phase, in windows of a second aligned as the
// limit's: a warm-up window; 4 windows spread evenly (steady); 6 with
// 80 % of the demand on one region, the next each window (moving); 2
// with 20/20/60 (skewed); 4 more so with the 60 % region cut off both
// ways (partition); the window in which the links heal, at its start;
// and 2 windows after it (healed: the first window that starts two
// exchange intervals after the heal, and the next). It reports, per
// phase, the most and the mean a window admitted over the limit
// (steady-max/limit, steady-mean/limit, ...), and
//
//	degraded       decisions made without Redis, in every phase: 0, or
//	               the run fails
//	p50-µs p99-µs  a check's latency, steady and moving windows
//	base-p50-µs    the same in one region: the six instances on one
//	base-p99-µs    Redis without Region or Peers, the same stream's
//	               warm-up, steady and moving windows
//	p99/base       p99-µs over base-p99-µs
//	relay-slow-%   the relays to other regions that missed the peer
//	               store's deadline, over those sent
//	peers-open     the peer stores (12) whose circuit breaker was not
//	               closed at the end of the run
//
// Each window's admissions by region, and how old the oldest news of
// another region was that each region's first instance had at the
// window's end (Regions), are logged, a line a phase. -short (make
// test's bench-check) runs one steady and one moving window, the peers
// at their default deadline, and no partition.
func BenchmarkRegions(b *testing.B) {
	redisAddrs(b, redisTopologies[0]) // runs with the other Redis benchmarks
	servers := startRegionServers(b)
	phases := regionPhases()
	stream := regionStream(phases, 3, 1)
	var base []regionArrival
	for _, a := range stream {
		if a.phase == "warm-up" || a.phase == "steady" || a.phase == "moving" {
			base = append(base, a)
		}
	}
	timeouts := regionPeerTimeouts
	if testing.Short() {
		timeouts = timeouts[:1]
	}
	run := 0
	for _, pt := range timeouts {
		b.Run("peer-timeout="+pt.name, func(b *testing.B) {
			for b.Loop() {
				run++
				prefix := fmt.Sprintf("bouncer-%s-regions%d", runID, run)
				without := regionRun(b, servers, prefix+"-base", 0, base, nil)
				with := regionRun(b, servers, prefix, pt.timeout, stream, phases)
				regionReport(b, phases, with, without)
			}
		})
	}
}

// regionPeerTimeouts are the deadlines of the stores of other regions'
// Redis that BenchmarkRegions runs with: the store's default, which is
// what bouncer serve gives them (its --store-timeout), and one above the
// links' round trip.
var regionPeerTimeouts = []struct {
	name    string
	timeout time.Duration
}{
	{"default", 0},
	{"1s", time.Second},
}

// startRegionServers starts a redis-server a region and returns their
// addresses. Without a redis-server on PATH it skips b, or fails it
// under BOUNCER_REQUIRE_REDIS.
func startRegionServers(b *testing.B) []string {
	b.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("BOUNCER_REQUIRE_REDIS") != "" {
			b.Fatalf("redis-server not found on PATH: %v", err)
		}
		b.Skipf("redis-server not found on PATH, so the regions benchmark skips: %v", err)
	}
	var addrs []string
	var used []int
	for range regionNames {
		port := startRedisServer(b, bin, false, used)
		used = append(used, port)
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(port))
	}
	return addrs
}

// regionWorld is BenchmarkRegions's six instances, two a region in the
// order of regionNames, and the links between the regions.
type regionWorld struct {
	hs     []*hybrid.Limiter
	stores []*redisstore.Store         // each instance's, of its region
	peers  []*redisstore.Store         // the instances' stores of other regions
	links  map[[2]int]*linkproxy.Proxy // [from, to]
}

// newRegionWorld makes the instances, their keys under prefix. With
// regions, each region's over its server of servers, each instance
// naming its region and its peers, stores with the deadline peerTimeout
// (0: the default) through a link a direction between two regions;
// without, one region: every instance over the first server.
func newRegionWorld(b *testing.B, servers []string, prefix string, regions bool, peerTimeout time.Duration) *regionWorld {
	b.Helper()
	w := &regionWorld{links: map[[2]int]*linkproxy.Proxy{}}
	for r := range regionNames {
		for o := range regionNames {
			if regions && o != r {
				p, err := linkproxy.New(servers[o], linkproxy.Options{Delay: regionLinkDelay})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { p.Close() })
				w.links[[2]int{r, o}] = p
			}
		}
	}
	for r, name := range regionNames {
		for range 2 {
			o := hybrid.Options{}
			if regions {
				o.Region, o.Peers = name, map[string]store.Sharer{}
				for q, other := range regionNames {
					if q != r {
						ps := openRegionStore(b, w.links[[2]int{r, q}].Addr(), prefix, peerTimeout)
						o.Peers[other], w.peers = ps, append(w.peers, ps)
					}
				}
			}
			own := servers[0] // one region: every instance on one Redis
			if regions {
				own = servers[r]
			}
			s := openRegionStore(b, own, prefix, 0)
			w.stores, w.hs = append(w.stores, s), append(w.hs, hybrid.New(s, nil, o))
		}
	}
	return w
}

// openRegionStore opens a store of the Redis at addr with the deadline
// timeout, 0 meaning the default (but under -short, when the rest of make
// test shares the machine), and waits until it has connected.
func openRegionStore(b *testing.B, addr, prefix string, timeout time.Duration) *redisstore.Store {
	b.Helper()
	if timeout == 0 {
		timeout = smokeTimeout()
	}
	s, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption([]string{addr}), Prefix: prefix, Timeout: timeout})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitConnected(ctx); err != nil {
		b.Fatalf("store of %s: %v", addr, err)
	}
	return s
}

// partition cuts region r off from the others, both ways, or heals it.
func (w *regionWorld) partition(r int, cut bool) {
	for k, p := range w.links {
		if k[0] == r || k[1] == r {
			if cut {
				p.Partition()
			} else {
				p.Heal()
			}
		}
	}
}

// regionResult is what a run decided: per window, the checks and those
// allowed by region; the latencies of the steady and moving checks; the
// checks degraded or failed; the relays sent and those that missed their
// deadline; and what each region's first instance knew of the regions
// at the end of each window.
type regionResult struct {
	checks, allowed  [][3]int64
	latencies        []time.Duration
	degraded, failed int64
	firstErr         error
	relays, slow     uint64
	peersOpen        int
	views            [][][]hybrid.RegionStats
}

// regionRun runs stream through a new regionWorld from the start of the
// next second; phases (nil: without regions) say when the last region is
// cut off; peerTimeout is the deadline of the peers' stores (0: the
// default).
func regionRun(b *testing.B, servers []string, prefix string, peerTimeout time.Duration, stream []regionArrival, phases []regionPhase) regionResult {
	b.Helper()
	w := newRegionWorld(b, servers, prefix, phases != nil, peerTimeout)
	windows := stream[len(stream)-1].window + 1
	res := regionResult{checks: make([][3]int64, windows), allowed: make([][3]int64, windows), views: make([][][]hybrid.RegionStats, windows)}
	start := time.Now().Truncate(time.Second).Add(time.Second)
	var timers []*time.Timer
	var mu sync.Mutex
	for win := range windows {
		end := start.Add(time.Duration(win+1)*regionLimit.Period - 20*time.Millisecond)
		timers = append(timers, time.AfterFunc(time.Until(end), func() {
			mu.Lock()
			defer mu.Unlock()
			for r := range regionNames {
				res.views[win] = append(res.views[win], w.hs[2*r].Regions())
			}
		}))
	}
	win := 0
	for _, p := range phases {
		if p.cut {
			cutAt, healAt := start.Add(time.Duration(win)*regionLimit.Period), start.Add(time.Duration(win+p.windows)*regionLimit.Period)
			last := len(regionNames) - 1
			timers = append(timers, time.AfterFunc(time.Until(cutAt), func() { w.partition(last, true) }),
				time.AfterFunc(time.Until(healAt), func() { w.partition(last, false) }))
		}
		win += p.windows
	}
	regionDrive(w, stream, start, &res)
	for _, t := range timers {
		t.Stop()
	}
	for _, h := range w.hs {
		h.Close()
	}
	for _, s := range append(slices.Clone(w.stores), w.peers...) {
		res.degraded += int64(s.Health().DegradedN)
	}
	for _, s := range w.peers {
		h := s.Health()
		res.relays, res.slow = res.relays+h.Calls, res.slow+h.SlowN
		if slices.ContainsFunc(h.Nodes, func(n redisstore.NodeHealth) bool { return n.Breaker != redisstore.BreakerClosed }) {
			res.peersOpen++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return res
}

// regionDrive makes stream's checks, each of cost 1 on the arrival's
// instance at start plus its offset, open loop: each in a goroutine of
// its own, whatever the earlier ones' answers. Each check counts in the
// window (from start) of the time it was made; the latencies of the
// steady and moving ones are kept.
func regionDrive(w *regionWorld, stream []regionArrival, start time.Time, res *regionResult) {
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "global", Limits: []bouncer.Limit{regionLimit}}}, Cost: 1}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, a := range stream {
		time.Sleep(time.Until(start.Add(a.at)))
		wg.Go(func() {
			made := time.Now()
			d, err := w.hs[a.instance].Check(context.Background(), req)
			took := time.Since(made)
			win, r := int(made.Sub(start)/regionLimit.Period), a.instance/2
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if res.failed++; res.firstErr == nil {
					res.firstErr = err
				}
			case d.Degraded:
				res.degraded++
			}
			if a.phase == "steady" || a.phase == "moving" {
				res.latencies = append(res.latencies, took)
			}
			if win < len(res.checks) {
				res.checks[win][r]++
				if d.Allowed {
					res.allowed[win][r]++
				}
			}
		})
	}
	wg.Wait()
}

// regionReport reports a run of BenchmarkRegions: with regions, and the
// same instances in one region on the first phases of the same stream.
func regionReport(b *testing.B, phases []regionPhase, with, without regionResult) {
	b.Helper()
	if with.failed+without.failed > 0 {
		b.Fatalf("%d decisions failed (first error: %v)", with.failed+without.failed, cmp.Or(with.firstErr, without.firstErr))
	}
	var log strings.Builder
	win := 0
	for _, p := range phases {
		if p.name != "warm-up" && p.name != "heal" {
			most, sum := int64(0), int64(0)
			for k := win; k < win+p.windows; k++ {
				all := with.allowed[k][0] + with.allowed[k][1] + with.allowed[k][2]
				most, sum = max(most, all), sum+all
			}
			b.ReportMetric(float64(most)/float64(regionLimit.Rate), p.name+"-max/limit")
			b.ReportMetric(float64(sum)/float64(p.windows)/float64(regionLimit.Rate), p.name+"-mean/limit")
		}
		fmt.Fprintf(&log, "windows %d-%d (%s): allowed by region %v of checks %v; the oldest news of a region each region's first instance had at their ends %v\n",
			win, win+p.windows-1, p.name, with.allowed[win:win+p.windows], with.checks[win:win+p.windows], oldestNews(with.views[win:win+p.windows]))
		win += p.windows
	}
	b.ReportMetric(float64(with.degraded+without.degraded), "degraded")
	if with.degraded+without.degraded > 0 {
		b.Errorf("%d decisions degraded with regions, %d without: not a valid run", with.degraded, without.degraded)
	}
	slices.Sort(with.latencies)
	slices.Sort(without.latencies)
	p99, base99 := percentile(with.latencies, 0.99), percentile(without.latencies, 0.99)
	b.ReportMetric(micros(percentile(with.latencies, 0.50)), "p50-µs")
	b.ReportMetric(micros(p99), "p99-µs")
	b.ReportMetric(micros(percentile(without.latencies, 0.50)), "base-p50-µs")
	b.ReportMetric(micros(base99), "base-p99-µs")
	b.ReportMetric(float64(p99)/float64(base99), "p99/base")
	if with.relays > 0 {
		b.ReportMetric(100*float64(with.slow)/float64(with.relays), "relay-slow-%")
	}
	b.ReportMetric(float64(with.peersOpen), "peers-open")
	fmt.Fprintf(&log, "in one region: allowed by the instances of each region %v of checks %v", without.allowed, without.checks)
	b.Log(log.String()) // at most 9 lines: go test keeps 10 of a benchmark's
}

// oldestNews returns, per window of views, how old the oldest news of
// another region was that each region's first instance had (-1: a region
// never heard from), in milliseconds.
func oldestNews(views [][][]hybrid.RegionStats) [][]int64 {
	out := make([][]int64, len(views))
	for k, byRegion := range views {
		for _, rs := range byRegion {
			oldest := int64(0)
			for _, r := range rs[1:] {
				if r.Age < 0 {
					oldest = -1
					break
				}
				oldest = max(oldest, r.Age.Milliseconds())
			}
			out[k] = append(out[k], oldest)
		}
	}
	return out
}
