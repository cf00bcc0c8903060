package bench

import (
	"context"
	"errors"
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

// regionBucket is the global limit of the case algorithm=token_bucket:
// an async token bucket of regionLimit's rate, a second's burst, each
// region's Redis charged with the others' admissions.
var regionBucket = bouncer.Limit{Name: "regions-bucket", Algorithm: bouncer.TokenBucket, Rate: 300, Period: time.Second, Burst: 300, Mode: bouncer.Async}

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

// regionLatencyPhases are the windows of a run of BenchmarkRegions's
// latency rounds: a warm-up window, then steady and moving windows, whose
// checks' latencies are kept; under -short one of each.
func regionLatencyPhases() []regionPhase {
	if testing.Short() {
		return []regionPhase{{"warm-up", 1, evenRegions, false}, {"steady", 1, evenRegions, false}, {"moving", 1, movingRegions, false}}
	}
	return []regionPhase{{"warm-up", 1, evenRegions, false}, {"steady", 2, evenRegions, false}, {"moving", 3, movingRegions, false}}
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
// limit (issue 37, docs/regions.md), and what the regions' exchange adds
// to a check's latency. Each region has a redis-server of its own
// (started by the benchmark on free loopback ports) and two instances:
// hybrid.New(redisstore.New(…), nil, hybrid.Options{Region, Peers}), each
// with stores of its own, all else at the defaults (real clock,
// background goroutines, the store's deadline, RegionTTL). An instance's
// peers are stores of the other regions' Redis reached through a
// linkproxy a directed link that adds 50 ms each way (100 ms a round
// trip), with the deadline the case names: peer-timeout=default, the
// store's 50 ms, and peer-timeout=1s, above the round trip, which is what
// bouncer serve gives them. The limit is a fixed window of 300 a
// second, in async mode, and in the cases peer-timeout=1s/mode=strict and
// mode=lease in those modes inside each region; in the cases
// peer-timeout=1s/algorithm=token_bucket and …/mode=strict, a token
// bucket of 300 a second with a burst of 300 (its burst taken in the
// warm-up window), async and strict.
//
// One op first makes one run of a seeded open-loop Poisson stream of
// checks of one key at three times the limit's rate, each check made on
// the wall clock at its time, spread over the regions (evenly over a
// region's instances) phase by phase, in windows of a second aligned as
// the limit's: a warm-up window; 4 windows spread evenly (steady); 6 with
// 80 % of the demand on one region, the next each window (moving); 2
// with 20/20/60 (skewed); 4 more so with the 60 % region cut off both
// ways (partition); the window in which the links heal, at its start;
// and 2 windows after it (healed: the first window that starts two
// exchange intervals after the heal, and the next). It reports, per
// phase, the most and the mean a window admitted over the limit
// (steady-max/limit, steady-mean/limit, ...), and
//
//	degraded       decisions made without Redis, in every run: 0, or
//	               the run fails
//	relay-slow-%   the relays to other regions that missed the peer
//	               store's deadline, over those sent
//	peers-open     the peer stores (12) whose circuit breaker was not
//	               closed at the end of the run
//
// Then, in the peer-timeout=1s case, latency rounds (regionLatency): in
// each, the same world without regions (the baseline) and with them run
// the same stream, one after the other, and it reports medians over the
// rounds of
//
//	p50-µs p99-µs  a check's latency with regions, steady and moving
//	               windows
//	base-p50-µs    the same in the baseline
//	base-p99-µs
//	p99/base       a round's p99-µs over its base-p99-µs; and the
//	p99/base-min   least and the most of them
//	p99/base-max
//
// Each window's admissions by region, and how old the oldest news of
// another region was that each region's first instance had at the
// window's end (Regions), are logged, a line a phase, and the rounds'
// latencies on one line. -short (make test's bench-check) runs the
// peer-timeout=1s case only, its first run with one steady and one moving
// window and no partition, and one latency round of one window of each.
func BenchmarkRegions(b *testing.B) {
	redisAddrs(b, redisTopologies[0]) // runs with the other Redis benchmarks
	servers := startRegionServers(b)
	phases := regionPhases()
	stream := regionStream(phases, 3, 1)
	cases := regionCases
	if testing.Short() {
		cases = []regionCase{{"1s", time.Second, 1, bouncer.Async, false}}
	}
	run := 0
	for _, c := range cases {
		b.Run("peer-timeout="+c.name, func(b *testing.B) {
			for b.Loop() {
				run++
				prefix := fmt.Sprintf("bouncer-%s-regions%d", runID, run)
				regionReport(b, phases, regionRun(b, servers, prefix, c, stream, phases))
				if c.rounds > 0 {
					regionLatency(b, servers, prefix, c)
				}
			}
		})
	}
}

// regionCase is a case of BenchmarkRegions: the deadline of the stores
// of other regions' Redis (0: the store's default) and how many latency
// rounds it runs after its run of every phase.
type regionCase struct {
	name        string
	peerTimeout time.Duration
	rounds      int
	mode        bouncer.Mode // the limit's, inside each region
	bucket      bool         // regionBucket, not regionLimit
}

// regionCases are BenchmarkRegions's cases: the peers at the store's
// default deadline, and at one above the links' round trip, which is
// what bouncer serve gives them (its --region-peers), with the latency
// rounds; and the latter with the limit strict (with latency rounds),
// and in lease mode, inside each region.
var regionCases = []regionCase{
	{"default", 0, 0, bouncer.Async, false},
	{"1s", time.Second, 5, bouncer.Async, false},
	{"1s/mode=strict", time.Second, 3, bouncer.Strict, false},
	{"1s/mode=lease", time.Second, 0, bouncer.Lease, false},
	{"1s/algorithm=token_bucket", time.Second, 0, bouncer.Async, true},
	{"1s/algorithm=token_bucket/mode=strict", time.Second, 0, bouncer.Strict, true},
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
	limit  bouncer.Limit               // what the instances check
	stores []*redisstore.Store         // each instance's, of its region
	peers  []*redisstore.Store         // the instances' stores of other regions
	links  map[[2]int]*linkproxy.Proxy // [from, to]
	closed sync.Once
}

// newRegionWorld makes the instances, their keys under prefix, each
// region's over its server of servers, and for each instance stores of
// the other regions' Redis with the deadline peerTimeout (0: the
// default), through a link a direction between two regions. With
// regions, each instance names its region and those stores as its peers,
// and checks regionLimit; without, the same servers, links and stores
// are there but unused, and each region is on its own with a third of
// regionLimit, so that together they admit and deny as much. Its stores
// and links close with b or at close, whichever comes first.
func newRegionWorld(b *testing.B, servers []string, prefix string, regions bool, peerTimeout time.Duration, c regionCase) *regionWorld {
	b.Helper()
	w := &regionWorld{limit: regionLimit, links: map[[2]int]*linkproxy.Proxy{}}
	if c.bucket {
		w.limit = regionBucket
	}
	w.limit.Mode = c.mode
	if !regions {
		w.limit.Rate /= int64(len(regionNames))
		w.limit.Burst /= int64(len(regionNames))
	}
	b.Cleanup(w.close)
	for r := range regionNames {
		for o := range regionNames {
			if o != r {
				p, err := linkproxy.New(servers[o], linkproxy.Options{Delay: regionLinkDelay})
				if err != nil {
					b.Fatal(err)
				}
				w.links[[2]int{r, o}] = p
			}
		}
	}
	own, peers := make([]*redisstore.Store, 2*len(regionNames)), make([][]*redisstore.Store, 2*len(regionNames))
	var open []func() error // each opens one store
	for i := range own {
		r := i / 2
		open = append(open, func() (err error) { own[i], err = openRegionStore(servers[r], prefix, 0); return err })
		peers[i] = make([]*redisstore.Store, len(regionNames))
		for q := range regionNames {
			if q != r {
				open = append(open, func() (err error) {
					peers[i][q], err = openRegionStore(w.links[[2]int{r, q}].Addr(), prefix, peerTimeout)
					return err
				})
			}
		}
	}
	errs := make([]error, len(open))
	var wg sync.WaitGroup
	for k, f := range open {
		wg.Go(func() { errs[k] = f() })
	}
	wg.Wait()
	for i, s := range own { // every store opened closes with w
		if s != nil {
			w.stores = append(w.stores, s)
		}
		for _, ps := range peers[i] {
			if ps != nil {
				w.peers = append(w.peers, ps)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	for i, s := range own {
		o := hybrid.Options{}
		if regions {
			o.Region, o.Peers = regionNames[i/2], map[string]store.Sharer{}
			for q, ps := range peers[i] {
				if ps != nil {
					o.Peers[regionNames[q]] = ps
				}
			}
		}
		w.hs = append(w.hs, hybrid.New(s, nil, o))
	}
	return w
}

// close closes w's stores, all at once, then its links; once.
func (w *regionWorld) close() {
	w.closed.Do(func() {
		var wg sync.WaitGroup
		for _, s := range append(slices.Clone(w.stores), w.peers...) {
			wg.Go(func() { s.Close() })
		}
		wg.Wait()
		for _, p := range w.links {
			p.Close()
		}
	})
}

// openRegionStore opens a store of the Redis at addr with the deadline
// timeout, 0 meaning the default (but under -short, when the rest of make
// test shares the machine), and waits until it has connected. The caller
// closes it.
func openRegionStore(addr, prefix string, timeout time.Duration) (*redisstore.Store, error) {
	if timeout == 0 {
		timeout = smokeTimeout()
	}
	s, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption([]string{addr}), Prefix: prefix, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitConnected(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("store of %s: %w", addr, err)
	}
	return s, nil
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

// regionRun runs stream through a new regionWorld of case c from the
// start of the next second, and closes the world; phases (nil: without
// regions) say when the last region is cut off.
func regionRun(b *testing.B, servers []string, prefix string, c regionCase, stream []regionArrival, phases []regionPhase) regionResult {
	b.Helper()
	w := newRegionWorld(b, servers, prefix, phases != nil, c.peerTimeout, c)
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
	w.close()
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
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "global", Limits: []bouncer.Limit{w.limit}}}, Cost: 1}
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

// regionReport reports BenchmarkRegions's run of every phase.
func regionReport(b *testing.B, phases []regionPhase, with regionResult) {
	b.Helper()
	regionValid(b, "with regions", with)
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
	b.ReportMetric(float64(with.degraded), "degraded")
	if with.relays > 0 {
		b.ReportMetric(100*float64(with.slow)/float64(with.relays), "relay-slow-%")
	}
	b.ReportMetric(float64(with.peersOpen), "peers-open")
	b.Log(strings.TrimSuffix(log.String(), "\n")) // at most 9 lines: go test keeps 10 of a benchmark's
}

// regionValid fails b if a check of res failed, and marks it failed if a
// check was degraded: not a valid run.
func regionValid(b *testing.B, what string, res regionResult) {
	b.Helper()
	if res.failed > 0 {
		b.Fatalf("%s: %d decisions failed (first error: %v)", what, res.failed, res.firstErr)
	}
	if res.degraded > 0 {
		b.Errorf("%s: %d decisions degraded: not a valid run", what, res.degraded)
	}
}

// regionLatency runs c's latency rounds. Each round runs a stream of
// regionLatencyPhases (seeded by the round) through a new world without
// regions (the baseline: the same servers, links and stores, each region
// on its own) and through a new world with regions, the baseline first in
// even rounds and last in odd ones, so that neither always runs first.
// It reports the medians over the rounds of each one's p50 and p99, and
// of a round's p99 over its baseline's, with their least and most.
func regionLatency(b *testing.B, servers []string, prefix string, c regionCase) {
	b.Helper()
	phases := regionLatencyPhases()
	var p50, p99, base50, base99, ratio []float64
	for round := range c.rounds {
		stream := regionStream(phases, 3, uint64(round)+2)
		var with, without regionResult
		basePrefix, withPrefix := fmt.Sprintf("%s-round%d-base", prefix, round), fmt.Sprintf("%s-round%d", prefix, round)
		if round%2 == 0 {
			without = regionRun(b, servers, basePrefix, c, stream, nil)
			with = regionRun(b, servers, withPrefix, c, stream, phases)
		} else {
			with = regionRun(b, servers, withPrefix, c, stream, phases)
			without = regionRun(b, servers, basePrefix, c, stream, nil)
		}
		regionValid(b, fmt.Sprintf("round %d with regions", round), with)
		regionValid(b, fmt.Sprintf("round %d without", round), without)
		slices.Sort(with.latencies)
		slices.Sort(without.latencies)
		p50, p99 = append(p50, micros(percentile(with.latencies, 0.50))), append(p99, micros(percentile(with.latencies, 0.99)))
		base50, base99 = append(base50, micros(percentile(without.latencies, 0.50))), append(base99, micros(percentile(without.latencies, 0.99)))
		ratio = append(ratio, p99[round]/base99[round])
	}
	b.Logf("latency rounds, the baseline first in rounds 0, 2, ...: p50 µs with regions %.1f, baseline %.1f; p99 µs with regions %.1f, baseline %.1f; p99/base %.2f",
		p50, base50, p99, base99, ratio) // one line: go test keeps 10 of a benchmark's
	b.ReportMetric(median(p50), "p50-µs")
	b.ReportMetric(median(p99), "p99-µs")
	b.ReportMetric(median(base50), "base-p50-µs")
	b.ReportMetric(median(base99), "base-p99-µs")
	b.ReportMetric(median(ratio), "p99/base")
	b.ReportMetric(slices.Min(ratio), "p99/base-min")
	b.ReportMetric(slices.Max(ratio), "p99/base-max")
}

// median returns the median of xs (of an even count, the upper middle).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
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
