package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// redisCheckKeys is how many keys BenchmarkRedisCheck spreads its checks
// over, and redisCallers how many goroutines check at once.
const redisCheckKeys = 10_000

var redisCallers = []int{1, 64, 256}

// BenchmarkRedisCheck measures decisions against Redis, standalone and
// Cluster, at 1, 64 and 256 concurrent callers (goroutines, whatever
// GOMAXPROCS is). One op is one decision of one key; the b.N decisions are
// dealt out evenly to the callers, and each caller walks the 10 000 keys
// from a point of its own, so that no two callers check one key in
// lockstep. Every check must be allowed: the benchmark fails if any is
// denied, fails, or (Bouncer's store) was decided without Redis. Two
// workloads:
//
//   - state=live: every key is warmed first with an hour's refill of
//     redisCheckSpec, so that every check updates live state (a busy
//     client's); afterwards Redis must still hold state for a sample of
//     the keys;
//   - state=refilled: redisRefillSpec, a unit a millisecond with room for
//     eight, and every key checked once first, so that nearly every check
//     finds its key's state refilled since the last (a client below its
//     limit, as most clients are most of the time).
//
// Each decision's latency is timed and kept in a slice preallocated for
// its caller; besides ns/op (wall time over b.N, all callers together) it
// reports:
//
//	decisions/s  b.N over the wall time of the run
//	p50-µs       median latency of one decision, in microseconds
//	p99-µs       99th percentile
//	p99.9-µs     99.9th percentile
//
// Bouncer's store runs GCRA, as redis_rate and throttled do (ulule counts
// in fixed windows), with its default deadline and failure policy, as
// users get it, and Buckets 256, 10 000 keys over 64 rounded up to a
// power of two, as its docs advise. It also reports
//
//	degraded     decisions made without Redis (the deadline missed): 0,
//	             or the run fails, not being a valid run on a healthy Redis
//
// Each implementation uses its client library's defaults: one rueidis
// client for Bouncer (a pool of connections per node), one go-redis v9
// client for each peer (per node, a pool of 10 connections per CPU, and
// one of 10 for pipelines).
func BenchmarkRedisCheck(b *testing.B) {
	states := []struct {
		name string
		spec spec
		warm int64 // what each key is charged first
	}{
		{"live", redisCheckSpec, redisWarmCost},
		{"refilled", redisRefillSpec, 1},
	}
	for _, tp := range redisTopologies {
		b.Run("topology="+tp.name, func(b *testing.B) {
			addrs := redisAddrs(b, tp)
			for _, st := range states {
				b.Run("state="+st.name, func(b *testing.B) {
					for i, im := range redisImpls {
						b.Run("impl="+im.name, func(b *testing.B) {
							c := dialRedis(b, addrs, tp.cluster)
							defer c.close()
							kp := fmt.Sprintf("%s-%s%d:", runID, st.name, i)
							l, pattern, err := im.new(c, kp, st.spec, bucketsFor(redisCheckKeys))
							if err != nil {
								b.Fatal(err)
							}
							defer l.close()
							defer func() {
								if err := deleteKeys(context.Background(), c.goredis, pattern); err != nil {
									b.Errorf("deleting %s: %v", pattern, err)
								}
							}()
							keys := make([]string, redisCheckKeys)
							for j := range keys {
								keys[j] = kp + "user:" + strconv.Itoa(j)
							}
							if err := redisWarm(l, keys, st.warm); err != nil {
								b.Fatal(err)
							}
							for _, n := range redisCallers {
								b.Run("callers="+strconv.Itoa(n), func(b *testing.B) {
									redisCheckRun(b, l, keys, n, st.name == "live")
								})
							}
							if s, ok := l.(*redisBouncer); ok {
								if st := s.s.Health(); st.Failures > 0 || st.DegradedN > 0 {
									b.Fatalf("store health: %+v, want no failures", st)
								}
							}
						})
					}
				})
			}
		})
	}
}

// redisWarm charges cost to every key, 64 keys at a time.
func redisWarm(l redisLimiter, keys []string, cost int64) error {
	var next atomic.Int64
	errs := make(chan error, 64)
	for range 64 {
		go func() {
			for {
				j := int(next.Add(1)) - 1
				if j >= len(keys) {
					errs <- nil
					return
				}
				ok, err := l.check(context.Background(), keys[j], cost)
				if err == nil && !ok {
					err = errDenied
				}
				if err != nil {
					next.Store(int64(len(keys)))
					errs <- fmt.Errorf("warming %q: %w", keys[j], err)
					return
				}
			}
		}()
	}
	var first error
	for range 64 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// redisCheckRun runs b.N checks of keys on l from callers goroutines and
// reports throughput and latency percentiles. With held set, Redis must
// hold state for a sample of the keys afterwards.
func redisCheckRun(b *testing.B, l redisLimiter, keys []string, callers int, held bool) {
	lat := make([]time.Duration, b.N)
	var denied, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range callers {
		// Caller g makes decisions lo to hi-1 and times them into its
		// own part of lat, starting at a key of its own.
		lo, hi := g*b.N/callers, (g+1)*b.N/callers
		mine := lat[lo:hi:hi]
		k := g * 7919 % len(keys)
		wg.Go(func() {
			ctx := context.Background()
			var d, f int64
			<-start
			for j := range mine {
				t0 := time.Now()
				ok, err := l.check(ctx, keys[k], 1)
				mine[j] = time.Since(t0)
				if err != nil {
					if f++; f == 1 {
						firstErr.CompareAndSwap(nil, &err)
					}
				} else if !ok {
					d++
				}
				if k++; k == len(keys) {
					k = 0
				}
			}
			denied.Add(d)
			failed.Add(f)
		})
	}
	// Collect the setup's and the previous run's garbage before the clock
	// starts.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	close(start)
	wg.Wait()
	b.StopTimer()
	if d, f := denied.Load(), failed.Load(); d > 0 || f > 0 {
		var err error
		if p := firstErr.Load(); p != nil {
			err = *p
		}
		b.Fatalf("%d checks denied and %d failed or degraded (first error: %v), want all allowed by Redis: not a valid run", d, f, err)
	}
	for j := 0; held && j < len(keys); j += len(keys) / 100 {
		if ok, err := l.held(context.Background(), keys[j]); !ok || err != nil {
			b.Fatalf("held(%q) after the run: %v, %v, want true, <nil>", keys[j], ok, err)
		}
	}
	slices.Sort(lat)
	if _, ok := l.(*redisBouncer); ok {
		b.ReportMetric(0, "degraded") // any would have failed the run above
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(micros(percentile(lat, 0.50)), "p50-µs")
	b.ReportMetric(micros(percentile(lat, 0.99)), "p99-µs")
	b.ReportMetric(micros(percentile(lat, 0.999)), "p99.9-µs")
}

// percentile returns the nearest-rank q-quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
