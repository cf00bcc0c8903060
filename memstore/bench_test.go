package memstore_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/calendar"
	"github.com/bouncerhq/bouncer/memstore"
)

// benchLimit admits every check of the benchmarks' workload on an existing
// key and keeps every key's state alive for the whole run, so that the
// benchmark measures the allowed path on stored state: the buckets refill
// one unit per 10ms (slower than one round over 100 000 keys) with room
// for 10⁸ checks, the windows span ten years.
func benchLimit(a bouncer.Algorithm) bouncer.Limit {
	if a.UsesBurst() {
		return bouncer.Limit{Name: "bench", Algorithm: a, Rate: 100, Period: time.Second, Burst: 100_000_000}
	}
	return bouncer.Limit{Name: "bench", Algorithm: a, Rate: bouncer.MaxRate, Period: bouncer.MaxPeriod}
}

// benchOptions configures the stores of BenchmarkCheck; -resolution sets
// their clock's Resolution.
var benchOptions = memstore.Options{}

func init() {
	flag.DurationVar(&benchOptions.Resolution, "resolution", 0, "memstore clock resolution for BenchmarkCheck (0: the default; negative: read the system clock on every check)")
	flag.BoolVar(&benchOptions.Persistent, "persistent", false, "BenchmarkCheck's stores are Persistent (SipHash keys)")
}

// benchLimits are BenchmarkCheck's limits by name: benchLimit of every
// algorithm whose state is one or two words, and a fixed window of
// calendar months in a zone with daylight saving time.
func benchLimits() (names []string, limits []bouncer.Limit) {
	for _, a := range bouncer.Algorithms() {
		if a == bouncer.SlidingWindowLog || a == bouncer.Concurrency {
			continue // their state grows with admitted checks; see BenchmarkCheckLog
		}
		names, limits = append(names, a.String()), append(limits, benchLimit(a))
	}
	month := calendar.Period{Unit: calendar.Month, Zone: "America/New_York"}
	cal := bouncer.Limit{Name: "bench", Algorithm: bouncer.FixedWindow, Rate: bouncer.MaxRate, Period: month.Longest(), Calendar: month}
	return append(names, "fixed_window_calendar_month"), append(limits, cal)
}

func BenchmarkCheck(b *testing.B) {
	ctx := context.Background()
	names, all := benchLimits()
	for j, name := range names {
		for _, n := range []int{1, 100_000} {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = "user:" + strconv.Itoa(i)
			}
			limits := []bouncer.Limit{all[j]}
			b.Run(fmt.Sprintf("%s/keys=%d/serial", name, n), func(b *testing.B) {
				s := memstore.New(benchOptions)
				defer s.Close()
				req := bouncer.Request{Keys: []bouncer.KeyLimits{{Limits: limits}}, Cost: 1}
				warm(b, s, keys, limits)
				b.ReportAllocs()
				i, denied := 0, 0
				for b.Loop() {
					req.Keys[0].Key = keys[i]
					if d, err := s.Check(ctx, req); err != nil || !d.Allowed {
						denied++
					}
					if i++; i == n {
						i = 0
					}
				}
				if denied > 0 {
					b.Fatalf("%d checks denied, want all allowed", denied)
				}
				if got := s.Len(); got != n {
					b.Fatalf("store holds %d keys, want %d", got, n)
				}
			})
			b.Run(fmt.Sprintf("%s/keys=%d/parallel", name, n), func(b *testing.B) {
				s := memstore.New(benchOptions)
				defer s.Close()
				warm(b, s, keys, limits)
				var next atomic.Uint64
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					req := bouncer.Request{Keys: []bouncer.KeyLimits{{Limits: limits}}, Cost: 1}
					i := int(next.Add(7919)) % n
					for pb.Next() {
						req.Keys[0].Key = keys[i]
						if d, err := s.Check(ctx, req); err != nil || !d.Allowed {
							panic(fmt.Sprint("denied: ", err))
						}
						if i++; i == n {
							i = 0
						}
					}
				})
			})
		}
	}
}

// warm stores state for every key, ten seconds' worth of refill deep, so
// that no key expires during the run.
func warm(b *testing.B, s *memstore.Store, keys []string, limits []bouncer.Limit) {
	b.Helper()
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Limits: limits}}, Cost: 1000}
	for _, k := range keys {
		req.Keys[0].Key = k
		if d, err := s.Check(context.Background(), req); err != nil || !d.Allowed {
			b.Fatalf("warming %q: %+v, %v", k, d, err)
		}
	}
}

// BenchmarkCharge is BenchmarkCheck's serial workload charged instead of
// checked (reserve-then-settle's second step): a charge should cost no
// more than a check.
func BenchmarkCharge(b *testing.B) {
	ctx := context.Background()
	for _, a := range bouncer.Algorithms() {
		if a == bouncer.SlidingWindowLog || a == bouncer.Concurrency {
			continue
		}
		for _, n := range []int{1, 100_000} {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = "user:" + strconv.Itoa(i)
			}
			limits := []bouncer.Limit{benchLimit(a)}
			b.Run(fmt.Sprintf("%s/keys=%d/serial", a, n), func(b *testing.B) {
				s := memstore.New(benchOptions)
				defer s.Close()
				req := bouncer.Request{Keys: []bouncer.KeyLimits{{Limits: limits}}, Cost: 1}
				warm(b, s, keys, limits)
				b.ReportAllocs()
				i, charges := 0, int64(0)
				start := time.Now()
				for b.Loop() {
					req.Keys[0].Key = keys[i]
					if err := s.Charge(ctx, req); err != nil {
						b.Fatal(err)
					}
					if i++; i == n {
						i = 0
					}
					charges++
				}
				if got := s.Len(); got != n {
					b.Fatalf("store holds %d keys, want %d", got, n)
				}
				// The first key was charged once when warmed and once in
				// every round of the keys; a bucket refilled meanwhile
				// (the windows are of MaxPeriod: they refill nothing).
				most := limits[0].Capacity() - 1 - charges/int64(n)
				if limits[0].Algorithm.UsesBurst() {
					most += int64(time.Since(start)/limits[0].Interval()) + 1
				}
				peek := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: keys[0], Limits: limits}}, Peek: true}
				if d, err := s.Check(ctx, peek); err != nil || d.Remaining > most {
					b.Fatalf("after %d charges, a peek: %+v, %v; want at most %d remaining", charges, d, err, most)
				}
			})
		}
	}
}
