package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/redisstore"
)

// hybridWorkload is one load of BenchmarkHybridCalls: keys keys, drawn
// uniformly or (zipf > 1) from a Zipf distribution of that exponent, each
// held to rate per second.
type hybridWorkload struct {
	name string
	keys int
	zipf float64
	rate int64
}

var hybridWorkloads = []hybridWorkload{
	// hot: a few keys, each checked far above its rate by every instance.
	{"hot", 10, 0, 100},
	// wide: many keys, a few hot and most checked below their rate.
	{"wide", 100_000, 1.1, 10},
}

// hybridInstances is how many hybrid limiters share the Redis server,
// hybridCallers how many goroutines check, spread over them, hybridLoad
// how many decisions a second they make together, and hybridWarm how
// long the load runs, untimed and uncounted, before the measured
// decisions: leases are sized by the demand they saw.
const (
	hybridInstances = 3
	hybridCallers   = 64
	hybridLoad      = 20_000
	hybridWarm      = time.Second
)

// BenchmarkHybridCalls measures how many Redis calls three hybrid
// limiters make per decision in each mode: three hybrid.New, each over
// a redisstore.Store of its own (its own client), all at their defaults
// (real clock, background goroutine), on the standalone Redis of
// BOUNCER_REDIS_ADDR, which nothing else may use during the run (its
// INFO commandstats are read before and after). 64 goroutines, 21 or 22
// to each limiter, make b.N decisions of one key and one limit, after a
// second of the same load untimed, at 20 000 decisions a second in all,
// every mode alike: the same load, as a service's users make it. (A
// closed loop of 64 goroutines that never block is a load no service
// has: it starves the stores' own goroutines of the CPU, and their
// replies miss their deadline.) Each goroutine keeps to its schedule, one
// decision every 3.2 ms, and catches up when it falls behind: a mode that
// cannot keep up reports fewer decisions/s. Two workloads:
//
//   - workload=hot: 10 keys, 100 a second each, checked uniformly: far
//     above their rate, so that nearly every decision is a denial;
//   - workload=wide: 100 000 keys, 10 a second each, drawn from a Zipf
//     distribution of exponent 1.1: a few keys over their rate, most
//     checked now and then, below it.
//
// each with a fixed window and with GCRA (burst: one second's rate).
// One op is one decision; besides ns/op it reports
//
//	decisions/s       b.N over the wall time
//	allowed-%         the share of decisions allowed
//	fcalls/1000       Redis calls per 1 000 decisions: FCALL and FCALL_RO,
//	                  by which the store does all its work (the commands
//	                  its scripts call count in commandstats too, and are
//	                  left out)
//	sent/1000         checks and refunds in those calls (a call of n counts n)
//	degraded          decisions made without Redis: 0, or the run fails
//
// The calls are counted once the limiters are closed and each has
// pushed its last async usage (Tick) and given its leases back (Close),
// so that what a mode owes Redis is counted in its run. The limiters'
// hybrid.Stats, summed, are logged.
func BenchmarkHybridCalls(b *testing.B) {
	addrs := redisAddrs(b, redisTopologies[0])
	admin := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer admin.Close()
	var run atomic.Int64
	for _, w := range hybridWorkloads {
		keys := make([]string, w.keys)
		for i := range keys {
			keys[i] = "u" + strconv.Itoa(i)
		}
		for _, alg := range []bouncer.Algorithm{bouncer.FixedWindow, bouncer.GCRA} {
			for _, m := range []bouncer.Mode{bouncer.Strict, bouncer.Lease, bouncer.Async} {
				l := bouncer.Limit{Name: "bench", Algorithm: alg, Rate: w.rate, Period: time.Second, Mode: m}
				if alg.UsesBurst() {
					l.Burst = w.rate
				}
				b.Run(fmt.Sprintf("load=%d/workload=%s/algorithm=%s/mode=%s", hybridLoad, w.name, alg, m), func(b *testing.B) {
					prefix := fmt.Sprintf("bouncer-%s-hybrid%d", runID, run.Add(1))
					hybridRun(b, admin, addrs, prefix, w, keys, l)
				})
			}
		}
	}
}

// hybridRun is one sub-benchmark of BenchmarkHybridCalls, its stores
// under prefix.
func hybridRun(b *testing.B, admin *redis.Client, addrs []string, prefix string, w hybridWorkload, keys []string, l bouncer.Limit) {
	ctx := context.Background()
	stores := make([]*redisstore.Store, hybridInstances)
	hs := make([]*hybrid.Limiter, hybridInstances)
	for i := range stores {
		s, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption(addrs), Prefix: prefix, Timeout: smokeTimeout()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if !s.Health().Connected {
			b.Fatalf("store %d not connected: %+v", i, s.Health())
		}
		stores[i] = s
		hs[i] = hybrid.New(s, nil, hybrid.Options{})
	}
	defer func() {
		if err := deleteKeys(ctx, admin, prefix+":*"); err != nil {
			b.Errorf("deleting %s:*: %v", prefix, err)
		}
	}()
	closed := false
	closeAll := func() {
		if closed {
			return
		}
		closed = true
		for _, h := range hs {
			h.Tick(ctx)
			h.Close()
		}
	}
	defer closeAll()
	if !testing.Short() {
		hybridDrive(hs, w, keys, l, 0, time.Now().Add(hybridWarm), 1)
	}
	sentBefore := int64(0)
	for _, s := range stores {
		sentBefore += int64(s.Health().Calls)
	}
	before := commandStats(b, admin)
	b.ResetTimer()
	r := hybridDrive(hs, w, keys, l, b.N, time.Time{}, 2)
	b.StopTimer()
	var st hybrid.Stats
	for _, h := range hs {
		st = addStats(st, h.Stats())
	}
	closeAll()
	after := commandStats(b, admin)
	sent := -sentBefore
	var storeDegraded uint64
	for _, s := range stores {
		hl := s.Health()
		sent += int64(hl.Calls)
		storeDegraded += hl.DegradedN
	}
	if r.failed > 0 {
		b.Fatalf("%d decisions failed (first error: %v)", r.failed, r.firstErr)
	}
	if r.degraded > 0 || storeDegraded > 0 {
		b.Fatalf("%d decisions degraded (stores: %d) on a healthy Redis: not a valid run", r.degraded, storeDegraded)
	}
	per := func(n int64) float64 { return float64(n) * 1000 / float64(b.N) }
	fcalls := after["fcall"] + after["fcall_ro"] - before["fcall"] - before["fcall_ro"]
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(100*float64(r.allowed)/float64(b.N), "allowed-%")
	b.ReportMetric(per(fcalls), "fcalls/1000")
	b.ReportMetric(per(int64(r.seen)), "lease-floor/1000")
	b.ReportMetric(per(sent), "sent/1000")
	b.ReportMetric(0, "degraded")
	if b.N > 1 {
		b.Logf("b.N=%d, the limiters' stats summed: %+v", b.N, st)
	}

}

// hybridResult counts the decisions of hybridDrive.
type hybridResult struct {
	allowed, degraded, failed int64
	firstErr                  error
	// seen is how many (instance, key, second) the decisions fell in: a
	// lease is charged in one window and lives at most a second, so lease
	// mode can ask Redis no fewer times than that.
	seen int
}

// seenKey is one (instance, key, second) of hybridResult.seen.
type seenKey struct {
	instance int
	key      string
	second   int64
}

// hybridDrive makes n decisions, or decisions until the deadline when n
// is 0, at hybridLoad a second, from hybridCallers goroutines, caller g on
// limiter g mod 3, each drawing keys with a generator seeded by seed and
// g.
func hybridDrive(hs []*hybrid.Limiter, w hybridWorkload, keys []string, l bouncer.Limit, n int, deadline time.Time, seed uint64) hybridResult {
	var allowed, degraded, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[seenKey]struct{}{}
	limits := []bouncer.Limit{l}
	every := time.Duration(hybridCallers) * time.Second / hybridLoad
	start := time.Now()
	for g := range hybridCallers {
		h := hs[g%len(hs)]
		count := (g+1)*n/hybridCallers - g*n/hybridCallers
		wg.Go(func() {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			next := func() string { return keys[rng.IntN(len(keys))] }
			if w.zipf > 1 {
				z := rand.NewZipf(rng, w.zipf, 1, uint64(len(keys)-1))
				next = func() string { return keys[z.Uint64()] }
			}
			var a, d, f int64
			mine := map[seenKey]struct{}{}
			at := start.Add(every * time.Duration(g) / hybridCallers)
			for j := 0; n > 0 && j < count || n == 0 && time.Now().Before(deadline); j++ {
				if wait := time.Until(at); wait > 0 {
					time.Sleep(wait)
				}
				at = at.Add(every)
				key := next()
				mine[seenKey{g % len(hs), key, time.Now().Unix()}] = struct{}{}
				dec, err := h.Check(ctx, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: limits}}, Cost: 1})
				switch {
				case err != nil:
					if f++; f == 1 {
						firstErr.CompareAndSwap(nil, &err)
					}
				case dec.Degraded:
					d++
				case dec.Allowed:
					a++
				}
			}
			allowed.Add(a)
			degraded.Add(d)
			failed.Add(f)
			mu.Lock()
			for k := range mine {
				seen[k] = struct{}{}
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	r := hybridResult{allowed: allowed.Load(), degraded: degraded.Load(), failed: failed.Load(), seen: len(seen)}
	if p := firstErr.Load(); p != nil {
		r.firstErr = *p
	}
	return r
}

// commandStats returns the calls of every command the server has served
// (INFO commandstats), by lower-case name.
func commandStats(b *testing.B, c *redis.Client) map[string]int64 {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatalf("INFO commandstats: %v", err)
	}
	m := map[string]int64{}
	for line := range strings.SplitSeq(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		m[strings.ToLower(name)] = n
	}
	return m
}

func addStats(a, b hybrid.Stats) hybrid.Stats {
	// Every counter, by reflection: a field added to hybrid.Stats is
	// summed without a change here (Exchanges and ShareDenied were left
	// out, and read 0, when they were added).
	av, bv := reflect.ValueOf(&a).Elem(), reflect.ValueOf(b)
	for i := range av.NumField() {
		switch f := av.Field(i); f.Kind() {
		case reflect.Uint64:
			f.SetUint(f.Uint() + bv.Field(i).Uint())
		case reflect.Int64:
			f.SetInt(f.Int() + bv.Field(i).Int())
		default:
			panic("addStats: hybrid.Stats has a field of kind " + f.Kind().String())
		}
	}
	return a
}

// addStats sums every counter of hybrid.Stats.
func TestAddStats(t *testing.T) {
	var one hybrid.Stats
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Uint64 {
			f.SetUint(uint64(i + 1))
		} else {
			f.SetInt(int64(i + 1))
		}
	}
	sum := reflect.ValueOf(addStats(one, one))
	for i := range sum.NumField() {
		if got := sum.Field(i).Interface(); fmt.Sprint(got) != fmt.Sprint(2*(i+1)) {
			t.Errorf("%s: %v, want %d", sum.Type().Field(i).Name, got, 2*(i+1))
		}
	}
}
