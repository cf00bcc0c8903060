package redisstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// Contention: several stores, each on its own client (its own connection
// pool), share one prefix and race on one key.
const (
	contendingStores     = 4
	contendingGoroutines = 64
	contendedCapacity    = 500
)

// redisTime reads the server's clock, which the scripts decide by.
func redisTime(t testing.TB, c rueidis.Client) time.Time {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v, %v", v, err)
	}
	return time.Unix(v[0], v[1]*1000)
}

// quietWindow returns a window length of at least an hour whose current
// window (windows are aligned to the Unix epoch) has at least 10 minutes
// left and began at least 10 minutes ago on Redis's clock, so that a test
// runs within one window without pinning the clock.
func quietWindow(t testing.TB, c rueidis.Client) time.Duration {
	t.Helper()
	now := redisTime(t, c).UnixNano()
	const margin = 10 * time.Minute
	for p := time.Hour; ; p += time.Minute {
		off := time.Duration(now % int64(p))
		if off >= margin && off <= p-margin {
			return p
		}
	}
}

// exactLimits returns one limit per algorithm, each of capacity
// contendedCapacity, none of which refills, slides or expires within the
// test: the buckets refill one unit an hour, the windows are the quiet
// window (the sliding window counter's previous window is empty on a
// fresh key), leases live an hour.
func exactLimits(window time.Duration) []bouncer.Limit {
	var ls []bouncer.Limit
	for _, a := range bouncer.Algorithms() {
		l := bouncer.Limit{Name: a.String(), Algorithm: a, Rate: contendedCapacity, Period: window}
		switch {
		case a.UsesBurst():
			l.Rate, l.Period, l.Burst = 1, time.Hour, contendedCapacity
		case a == bouncer.Concurrency:
			l.Period = time.Hour
		}
		ls = append(ls, l)
	}
	return ls
}

// TestExactUnderContention: 64 goroutines over 4 stores on 4 clients check
// one key until each has seen denials; together they must have been
// admitted exactly the capacity, each remaining count once.
func TestExactUnderContention(t *testing.T) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			as := addrs(t, tp.env)
			prefix := freshPrefix()
			var stores []*redisstore.Store
			for range contendingStores {
				stores = append(stores, newStore(t, newClient(t, as), redisstore.Options{Prefix: prefix}))
			}
			window := quietWindow(t, newClient(t, as))
			for _, l := range exactLimits(window) {
				t.Run(l.Algorithm.String(), func(t *testing.T) {
					key := "hot:" + freshPrefix()
					contend(t, stores, bouncer.Request{Cost: 1, Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}})
				})
			}
		})
	}
}

func contend(t *testing.T, stores []*redisstore.Store, r bouncer.Request) {
	ctx := context.Background()
	l := r.Keys[0].Limits[0]
	capacity := l.Capacity()
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		remaining = make([][]int64, contendingGoroutines) // per goroutine: Remaining of each admitted check
	)
	for g := range contendingGoroutines {
		s := stores[g%len(stores)]
		wg.Go(func() {
			<-start
			denials := 0
			// A goroutine can be admitted at most the capacity; the bound
			// only keeps a broken store from looping forever.
			for range capacity + 2 {
				d, err := s.Check(ctx, r)
				if err != nil {
					t.Errorf("goroutine %d: Check: %v", g, err)
					return
				}
				if d.Degraded {
					t.Errorf("goroutine %d: degraded decision %+v", g, d)
					return
				}
				if d.Capacity != capacity || d.LimitName != l.Name || d.Key != r.Keys[0].Key {
					t.Errorf("goroutine %d: decision %+v names the wrong limit", g, d)
				}
				if d.Allowed {
					remaining[g] = append(remaining[g], d.Remaining)
					continue
				}
				if d.Remaining != 0 || d.RetryAfter <= 0 {
					t.Errorf("goroutine %d: denied with %d remaining, retry after %v; want 0 remaining and a positive retry", g, d.Remaining, d.RetryAfter)
				}
				if denials++; denials == 2 {
					return
				}
			}
			t.Errorf("goroutine %d: %d checks and still not denied twice", g, capacity+2)
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}

	var all []int64
	for _, rs := range remaining {
		all = append(all, rs...)
	}
	if int64(len(all)) != capacity {
		t.Fatalf("%d goroutines on %d stores admitted %d checks of cost 1; want exactly the capacity %d", contendingGoroutines, len(stores), len(all), capacity)
	}
	// Each admitted check saw the state after its own charge: the counts
	// capacity-1 … 0, each exactly once.
	slices.Sort(all)
	for i, v := range all {
		if v != int64(i) {
			t.Fatalf("admitted checks reported Remaining %v…; want each of 0…%d exactly once (first mismatch at %d: %d)", all[:min(len(all), 10)], capacity-1, i, v)
		}
	}
	// Every store now sees the key exhausted.
	for i, s := range stores {
		peek := r
		peek.Cost, peek.Peek = 0, true
		if d, err := s.Check(ctx, peek); err != nil || !d.Allowed || d.Remaining != 0 || d.Degraded {
			t.Errorf("store %d: peek after the race = %+v, %v; want allowed with 0 remaining", i, d, err)
		}
		if d, err := s.Check(ctx, r); err != nil || d.Allowed {
			t.Errorf("store %d: check after the race = %+v, %v; want denied", i, d, err)
		}
	}
}
