package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/bench/refsvc"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/redisstore"
)

// sharesInstances is how many hybrid limiters share BenchmarkAsyncShares's
// key. sharesSpan is the window of BenchmarkAsyncShares's fixed window, and
// the span its bucket's admissions are counted over; sharesLate is how
// far into its warm-up window a run may begin (the arrivals it missed
// are not made) rather than wait for the next.
const (
	sharesInstances = 3
	sharesSpan      = 2 * time.Second
	sharesLate      = 250 * time.Millisecond
)

// sharesLimits are BenchmarkAsyncShares's limits, each one hot key
// shared by three instances in async mode, named by their algorithm.
var sharesLimits = []struct {
	name string
	l    bouncer.Limit
}{
	{"fixed_window", bouncer.Limit{Name: "shares", Algorithm: bouncer.FixedWindow, Rate: 300, Period: sharesSpan, Mode: bouncer.Async}},
	{"token_bucket", bouncer.Limit{Name: "shares", Algorithm: bouncer.TokenBucket, Rate: 150, Period: time.Second, Burst: 150, Mode: bouncer.Async}},
	// Ten times the rate, at 3× only: the Redis calls a second of a sync
	// every 100 ms are bounded whatever the load, so strict's calls over
	// async's grow with the load (at 450 checks a second, three instances'
	// thirty syncs a second bound the ratio at 15× however few calls a
	// sync makes).
	{"fixed_window/rate=3000", bouncer.Limit{Name: "shares", Algorithm: bouncer.FixedWindow, Rate: 3000, Period: sharesSpan, Mode: bouncer.Async}},
}

// sharesCasesOf are the cases run on the limit named name.
func sharesCasesOf(name string) []sharesCase {
	switch {
	case testing.Short():
		return sharesCases[:1]
	case strings.Contains(name, "rate="):
		return sharesCases[:2] // 3×, even and skew
	}
	return sharesCases
}

// sharesCase is one workload of BenchmarkAsyncShares: arrivals at load
// times the limit's rate, spread over the instances evenly, 70/20/10,
// or 70/20/10 moving to 10/20/70 halfway through the measured windows.
type sharesCase struct {
	spread string
	load   float64
}

var sharesCases = []sharesCase{
	{"even", 3}, {"skew", 3}, {"moving", 3},
	{"even", 1}, {"skew", 1},
	{"even", 0.8}, {"skew", 0.8},
}

// sharesWindows is how many whole windows a run measures after its
// warm-up window: one under -short (make test's bench-check), else 5.
func sharesWindows() int {
	if testing.Short() {
		return 1
	}
	return 5
}

// weights is how c spreads an arrival at offset at (from the start of
// the warm-up window) over the instances.
func (c sharesCase) weights(at time.Duration) []float64 {
	switch {
	case c.spread == "even":
		return []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}
	case c.spread == "moving" && at >= sharesSpan+time.Duration(sharesWindows())*sharesSpan/2:
		return []float64{0.1, 0.2, 0.7}
	default:
		return []float64{0.7, 0.2, 0.1}
	}
}

// arrival is one check of a stream: at its offset from the start of the
// warm-up window, on one instance.
type arrival struct {
	at       time.Duration
	instance int
}

// sharesStream is c's arrivals on l from a generator seeded by seed:
// Poisson, at c.load times l's rate, over the warm-up window and the
// measured ones.
func sharesStream(c sharesCase, l bouncer.Limit, seed uint64) []arrival {
	rng := rand.New(rand.NewPCG(seed, 37))
	perNs := c.load * float64(l.Rate) / float64(l.Period)
	end := time.Duration(1+sharesWindows()) * sharesSpan
	var s []arrival
	for t := time.Duration(0); ; {
		t += time.Duration(rng.ExpFloat64() / perNs)
		if t >= end {
			return s
		}
		x, i := rng.Float64(), 0
		for w := c.weights(t); i < len(w)-1 && x >= w[i]; i++ {
			x -= w[i]
		}
		s = append(s, arrival{t, i})
	}
}

// sharesCapacity is the most l can admit in one span: a window's rate,
// a bucket's burst and what it refills in the span.
func sharesCapacity(l bouncer.Limit) int64 {
	if !l.Algorithm.UsesBurst() {
		return l.Rate
	}
	return l.Burst + l.Rate*int64(sharesSpan/l.Period)
}

// BenchmarkAsyncShares measures how close async mode keeps one hot key
// to its limit across instances (issue 37), on real Redis: three
// hybrid.New(redisstore.New(…), nil, hybrid.Options{}), each with a
// store and client of its own, all at their defaults (real clock,
// background goroutine, the store's deadline), on the standalone Redis
// of BOUNCER_REDIS_ADDR, which nothing else may use during the run (its
// INFO commandstats are read before and after each run). Three limits:
//
//   - algorithm=fixed_window: 300 per 2 s window;
//   - algorithm=token_bucket: 150 a second, burst 150;
//   - algorithm=fixed_window/rate=3000: 3 000 per 2 s window, at 3× only
//     (spread=even and skew), and not under -short.
//
// Each case is a seeded open-loop Poisson stream of checks of one key,
// at 3, 1 or 0.8 times the limit's rate (150 a second), each check made
// on the wall clock at its time whatever the earlier ones' answers,
// spread over the three instances evenly (spread=even), 70/20/10
// (spread=skew), or, at 3×, 70/20/10 until halfway through the measured
// windows and 10/20/70 after (spread=moving). A run is a warm-up window
// and 5 whole windows (2 s each, aligned as the fixed window's are)
// after it; the bucket's admissions are counted over the same spans.
// Before an algorithm's cases, the same streams (other keys) are run
// together through three instances whose limit is strict: what the
// limit allows exactly, to compare with. One op is one run; it reports
//
//	max/limit            the most a measured window admitted, over the
//	                     limit: a window's 300, a bucket's burst and
//	                     refill in a span, 150 + 150 × 2 s = 450
//	mean/limit           the mean of the measured windows
//	strict-mean/limit    the same for strict on the same stream
//	max/strict           the most a measured window admitted over what
//	                     strict admitted in that window (a bucket under
//	                     overload admits its rate, 300 a span, not 450)
//	false-denials-%      per measured window, async's denials less
//	                     strict's (0 if fewer), summed, over the checks
//	fcalls/1000          Redis calls (FCALL and FCALL_RO in INFO
//	                     commandstats) per 1 000 checks, warm-up included
//	strict-fcalls/1000   the same for the strict run of all the cases
//	x-fewer-calls        strict-fcalls/1000 over fcalls/1000
//	degraded             decisions made without Redis: 0, or the run fails
//
// The calls are counted once the limiters have pushed their last usage
// (Tick) and closed; a run in which the server counted more calls than
// the stores sent checks (another client used the server) fails. The
// per-window admissions of both modes and each limiter's hybrid.Stats
// are logged.
//
// Beside async, the same streams at 3× (spread=even and skew) go to a
// cluster of three gubernator nodes (refsvc.Gubernator.StartCluster),
// arrival i's instance being node i, each check a request of behaviour
// GLOBAL (server=gubernator-global/…): for the window, gubernator's
// TOKEN_BUCKET of 300 per 2 s; for the bucket, its LEAKY_BUCKET of 150 a
// second, burst 150 (see gubernatorLimit). They report the same figures
// but the Redis calls, and need a build with -tags gubernator (they skip
// without it).
//
// -short (make test's bench-check) runs one case of each algorithm, one
// measured window, and no gubernator.
func BenchmarkAsyncShares(b *testing.B) {
	addrs := redisAddrs(b, redisTopologies[0])
	admin := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer admin.Close()
	guber, whyNot := sharesStartGubernator(b)
	run := 0
	prefix := func() string {
		run++
		return fmt.Sprintf("bouncer-%s-shares%d", runID, run)
	}
	for _, sl := range sharesLimits {
		if testing.Short() && strings.Contains(sl.name, "rate=") {
			continue
		}
		l, cases := sl.l, sharesCasesOf(sl.name)
		b.Run("algorithm="+sl.name, func(b *testing.B) {
			streams := make([][]arrival, len(cases))
			for i, c := range cases {
				streams[i] = sharesStream(c, l, uint64(i+1))
			}
			strictLimit := l
			strictLimit.Mode = bouncer.Strict
			strict, calls := sharesMeasure(b, admin, addrs, prefix(), strictLimit, streams)
			checks := int64(0)
			for _, r := range strict {
				checks += r.made
			}
			strictPer1000 := float64(calls) * 1000 / float64(checks)
			b.Logf("strict, every case's stream at once: %d checks, %d Redis calls (%.1f per 1000)", checks, calls, strictPer1000)
			for i, c := range cases {
				b.Run(fmt.Sprintf("load=%.1fx/spread=%s", c.load, c.spread), func(b *testing.B) {
					for b.Loop() {
						async, calls := sharesMeasure(b, admin, addrs, prefix(), l, streams[i:i+1])
						sharesReport(b, l, async[0], strict[i], calls, strictPer1000)
					}
				})
			}
			for i, c := range cases {
				if c.load != 3 || c.spread == "moving" {
					continue
				}
				b.Run(fmt.Sprintf("server=gubernator-global/load=%.1fx/spread=%s", c.load, c.spread), func(b *testing.B) {
					if guber == nil {
						b.Skip(whyNot)
					}
					for b.Loop() {
						sharesReportWindows(b, l, sharesMeasureGubernator(b, guber, prefix(), l, streams[i]), strict[i])
					}
				})
			}
		})
	}
}

// sharesGubernator returns a sharesChecker of l on the gubernator nodes
// at addrs (node i is instance i), each check of key a request of
// behaviour GLOBAL on prefix+key, and a func that closes its
// connections. It is nil in a build without -tags gubernator
// (async_shares_gubernator_test.go sets it).
var sharesGubernator func(addrs []string, prefix string, l bouncer.Limit) (sharesChecker, func(), error)

// sharesStartGubernator starts BenchmarkAsyncShares's gubernator cluster
// of three nodes, stopped when b ends, and returns their addresses; or
// nil and why there is none: under -short, in a build without -tags
// gubernator, or when the cluster cannot start here.
func sharesStartGubernator(b *testing.B) ([]string, string) {
	switch {
	case testing.Short():
		return nil, "-short leaves gubernator out"
	case sharesGubernator == nil:
		return nil, "gubernator needs a build with -tags gubernator"
	}
	nodes, err := refsvc.Gubernator{}.StartCluster(context.Background(), sharesInstances)
	if err != nil {
		return nil, "gubernator: " + err.Error()
	}
	var addrs []string
	for _, s := range nodes {
		b.Cleanup(s.Stop)
		addrs = append(addrs, s.Addr)
	}
	return addrs, ""
}

// sharesMeasureGubernator runs stream through the gubernator nodes at
// addrs under l (sharesGubernator), on a key under prefix, from the next
// window's start (sharesStart). It fails b if a check failed.
func sharesMeasureGubernator(b *testing.B, addrs []string, prefix string, l bouncer.Limit, stream []arrival) sharesRun {
	check, closeConns, err := sharesGubernator(addrs, prefix, l)
	if err != nil {
		b.Fatal(err)
	}
	defer closeConns()
	runs, errs := sharesDriveAll(check, [][]arrival{stream}, sharesStart(time.Now()))
	if errs.failed > 0 {
		b.Fatalf("%d checks failed (first error: %v)", errs.failed, errs.first)
	}
	return runs[0]
}

// sharesReport reports a run of BenchmarkAsyncShares: async's run of a
// stream, strict's run of the same, and async's Redis calls.
func sharesReport(b *testing.B, l bouncer.Limit, async, strict sharesRun, calls int64, strictPer1000 float64) {
	sharesReportWindows(b, l, async, strict)
	per1000 := float64(calls) * 1000 / float64(async.made)
	b.ReportMetric(per1000, "fcalls/1000")
	b.ReportMetric(strictPer1000, "strict-fcalls/1000")
	if per1000 > 0 {
		b.ReportMetric(strictPer1000/per1000, "x-fewer-calls")
	}
	b.ReportMetric(0, "degraded")
}

// sharesReportWindows reports what run admitted per measured window,
// against l's capacity and against strict's run of the same stream, and
// logs both runs' windows.
func sharesReportWindows(b *testing.B, l bouncer.Limit, run, strict sharesRun) {
	capacity := float64(sharesCapacity(l))
	var most, sum, strictSum, falseDenials, checks int64
	overStrict := 0.0
	for w := 1; w < len(run.checks); w++ {
		most = max(most, run.allowed[w])
		if strict.allowed[w] > 0 {
			overStrict = max(overStrict, float64(run.allowed[w])/float64(strict.allowed[w]))
		}
		sum += run.allowed[w]
		strictSum += strict.allowed[w]
		denied, strictDenied := run.checks[w]-run.allowed[w], strict.checks[w]-strict.allowed[w]
		falseDenials += max(denied-strictDenied, 0)
		checks += run.checks[w]
	}
	windows := float64(len(run.checks) - 1)
	b.ReportMetric(float64(most)/capacity, "max/limit")
	b.ReportMetric(float64(sum)/windows/capacity, "mean/limit")
	b.ReportMetric(float64(strictSum)/windows/capacity, "strict-mean/limit")
	b.ReportMetric(overStrict, "max/strict")
	b.ReportMetric(100*float64(falseDenials)/float64(checks), "false-denials-%")
	b.Logf("per window (warm-up first): checks %v; allowed %v; strict allowed %v", run.checks, run.allowed, strict.allowed)
	if run.stats != nil {
		b.Logf("each limiter's hybrid.Stats %+v", run.stats)
	}
}

// sharesRun is what a run decided of one stream, per window (0 is the
// warm-up): the checks made and those allowed; made counts every check
// made, a late one past the last window too.
type sharesRun struct {
	checks, allowed []int64
	made            int64
	stats           []hybrid.Stats // each limiter's; set on the first stream's run only
}

// sharesMeasure runs streams at once, stream i on key "k<i>", through
// three hybrid limiters of limit l (its Mode as given), each over a
// redisstore.Store of its own under prefix, all at their defaults, from
// the next window's start (sharesStart). It returns each stream's run
// and the Redis calls made meanwhile (INFO commandstats: FCALL and
// FCALL_RO), counted once the limiters have pushed their last usage
// (Tick) and closed. It fails b if a decision failed or was degraded,
// or (but under -short, when the rest of make test shares the server)
// if the server counted more calls than the stores sent checks: another
// client used it, and the count is not the run's.
func sharesMeasure(b *testing.B, admin *redis.Client, addrs []string, prefix string, l bouncer.Limit, streams [][]arrival) ([]sharesRun, int64) {
	ctx := context.Background()
	stores := make([]*redisstore.Store, sharesInstances)
	hs := make([]*hybrid.Limiter, sharesInstances)
	for i := range stores {
		s, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption(addrs), Prefix: prefix, Timeout: smokeTimeout()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if !s.Health().Connected {
			b.Fatalf("store %d not connected: %+v", i, s.Health())
		}
		stores[i], hs[i] = s, hybrid.New(s, nil, hybrid.Options{})
		defer hs[i].Close()
	}
	defer func() {
		if err := deleteKeys(ctx, admin, prefix+":*"); err != nil {
			b.Errorf("deleting %s:*: %v", prefix, err)
		}
	}()
	sent := func() (n uint64, degraded uint64) {
		for _, s := range stores {
			n, degraded = n+s.Health().Calls, degraded+s.Health().DegradedN
		}
		return n, degraded
	}
	sentBefore, _ := sent()
	before := commandStats(b, admin)
	runs, errs := sharesDriveAll(hybridChecker(hs, l), streams, sharesStart(time.Now()))
	for _, h := range hs {
		h.Tick(ctx)
		h.Close()
		runs[0].stats = append(runs[0].stats, h.Stats())
	}
	after := commandStats(b, admin)
	sentAfter, storeDegraded := sent()
	calls := after["fcall"] + after["fcall_ro"] - before["fcall"] - before["fcall_ro"]
	if errs.failed > 0 {
		b.Fatalf("%d decisions failed (first error: %v)", errs.failed, errs.first)
	}
	if errs.degraded > 0 || storeDegraded > 0 {
		b.Fatalf("%d decisions degraded (stores: %d) on a healthy Redis: not a valid run", errs.degraded, storeDegraded)
	}
	sentChecks := int64(sentAfter - sentBefore)
	if calls > sentChecks {
		msg := fmt.Sprintf("the server counted %d calls, the stores sent %d checks: another client used the server, not a valid run", calls, sentChecks)
		if !testing.Short() {
			b.Fatal(msg)
		}
		b.Log(msg)
	}
	b.Logf("%s: %d Redis calls (INFO commandstats), %d checks sent by the stores", l.Mode, calls, sentChecks)
	return runs, calls
}

// sharesStart returns when a run's warm-up window begins: the window
// boundary just past, if it passed less than sharesLate ago, else the
// next.
func sharesStart(now time.Time) time.Time {
	span := int64(sharesSpan)
	start := time.Unix(0, now.UnixNano()/span*span)
	if now.Sub(start) > sharesLate {
		start = start.Add(sharesSpan)
	}
	return start
}

// sharesErrs counts the failed and degraded decisions of a run.
type sharesErrs struct {
	failed, degraded int64
	first            error
}

// sharesChecker decides a check of cost 1 of key on instance i (0, 1
// or 2) of one limit: whether it was allowed, and whether it was decided
// without the shared state (degraded).
type sharesChecker func(ctx context.Context, i int, key string) (allowed, degraded bool, err error)

// hybridChecker is the sharesChecker of hs under l: instance i is hs[i].
func hybridChecker(hs []*hybrid.Limiter, l bouncer.Limit) sharesChecker {
	return func(ctx context.Context, i int, key string) (bool, bool, error) {
		r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: 1}
		d, err := hs[i].Check(ctx, r)
		return d.Allowed, d.Degraded, err
	}
}

// sharesDriveAll runs each of streams on a key of its own through check
// from start, all at once, as sharesDrive does.
func sharesDriveAll(check sharesChecker, streams [][]arrival, start time.Time) ([]sharesRun, sharesErrs) {
	runs := make([]sharesRun, len(streams))
	errs := make([]sharesErrs, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() { runs[i], errs[i] = sharesDrive(check, s, "k"+strconv.Itoa(i), start) })
	}
	wg.Wait()
	var all sharesErrs
	for _, e := range errs {
		all.failed, all.degraded = all.failed+e.failed, all.degraded+e.degraded
		if all.first == nil {
			all.first = e.first
		}
	}
	return runs, all
}

// sharesDrive makes stream's checks of key with check, each of cost 1,
// on the instance the arrival names, at start plus its offset, open loop:
// each in a goroutine of its own, whatever the earlier ones' answers.
// An arrival whose time passed before the run began is not made. Each
// check counts in the window (from start) of the time it was made.
func sharesDrive(check sharesChecker, stream []arrival, key string, start time.Time) (sharesRun, sharesErrs) {
	type outcome struct {
		window                  int
		made, allowed, degraded bool
		err                     error
	}
	out := make([]outcome, len(stream))
	begun := time.Now()
	var wg sync.WaitGroup
	for k, a := range stream {
		at := start.Add(a.at)
		if at.Before(begun) {
			continue
		}
		time.Sleep(time.Until(at))
		wg.Go(func() {
			made := time.Now()
			allowed, degraded, err := check(context.Background(), a.instance, key)
			out[k] = outcome{int(made.Sub(start) / sharesSpan), true, allowed, degraded, err}
		})
	}
	wg.Wait()
	windows := 1 + sharesWindows()
	run := sharesRun{checks: make([]int64, windows), allowed: make([]int64, windows)}
	var errs sharesErrs
	for _, o := range out {
		switch {
		case !o.made:
			continue
		case o.err != nil:
			if errs.failed++; errs.first == nil {
				errs.first = o.err
			}
		case o.degraded:
			errs.degraded++
		}
		run.made++
		if o.window >= windows {
			continue
		}
		run.checks[o.window]++
		if o.allowed {
			run.allowed[o.window]++
		}
	}
	return run, errs
}
