package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
)

// Goroutines and checks per goroutine of the concurrent tests: 2048 checks
// race for a capacity of 500, with the clock frozen so that nothing
// refills.
const (
	goroutines  = 64
	perRoutine  = 32
	bigCapacity = 500
)

// bigLimits returns one limit per algorithm with capacity bigCapacity and
// nothing refilled or expired within the test.
func bigLimits() []bouncer.Limit {
	var ls []bouncer.Limit
	for _, l := range exampleLimits() {
		l.Period = time.Hour
		if l.Algorithm.UsesBurst() {
			l.Rate, l.Burst = 1, bigCapacity
		} else {
			l.Rate = bigCapacity
		}
		ls = append(ls, l)
	}
	return ls
}

// hammer runs f perRoutine times on each of goroutines goroutines at once
// and returns how many calls returned true.
func hammer(t *testing.T, f func() (bool, error)) int64 {
	t.Helper()
	var (
		admitted atomic.Int64
		wg       sync.WaitGroup
		start    = make(chan struct{})
		errs     = make(chan error, goroutines)
	)
	for range goroutines {
		wg.Go(func() {
			<-start
			for range perRoutine {
				ok, err := f()
				if err != nil {
					errs <- err
					return
				}
				if ok {
					admitted.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return admitted.Load()
}

func testConcurrent(t *testing.T, newStore Factory) {
	ctx := context.Background()
	for _, l := range bigLimits() {
		t.Run(l.Name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, newStore)
			r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: freshKey("hot"), Limits: []bouncer.Limit{l}}}, Cost: 1}
			got := hammer(t, func() (bool, error) {
				d, err := h.store.Check(ctx, r)
				return d.Allowed, err
			})
			if got != bigCapacity {
				t.Errorf("%d checks of cost 1 on one key: admitted %d, want %d", goroutines*perRoutine, got, bigCapacity)
			}
		})
	}

	t.Run("all_or_nothing", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, newStore)
		la := bouncer.Limit{Name: "a", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 300}
		lb := bouncer.Limit{Name: "b", Algorithm: bouncer.SlidingWindowCounter, Rate: bigCapacity, Period: time.Hour}
		a, b := freshKey("hot-a"), freshKey("hot-b")
		both := bouncer.Request{Cost: 1, Keys: []bouncer.KeyLimits{{Key: a, Limits: []bouncer.Limit{la}}, {Key: b, Limits: []bouncer.Limit{lb}}}}
		onlyB := bouncer.Request{Cost: 1, Keys: []bouncer.KeyLimits{{Key: b, Limits: []bouncer.Limit{lb}}}}
		var turn, admittedBoth atomic.Int64
		got := hammer(t, func() (bool, error) {
			r := onlyB
			if turn.Add(1)%2 == 0 {
				r = both
			}
			d, err := h.store.Check(ctx, r)
			if d.Allowed && len(r.Keys) == 2 {
				admittedBoth.Add(1)
			}
			return d.Allowed, err
		})
		if got != bigCapacity {
			t.Errorf("checks on key b: admitted %d, want %d", got, bigCapacity)
		}
		h.wantRemaining("key a, charged only with key b", a, la, 300-admittedBoth.Load())
		h.wantRemaining("key b", b, lb, 0)
	})

	t.Run("leases", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, newStore)
		l := bouncer.Limit{Name: "inflight", Algorithm: bouncer.Concurrency, Rate: 8, Period: time.Hour}
		r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: freshKey("leases"), Limits: []bouncer.Limit{l}}}, Cost: 1}
		var inFlight, most atomic.Int64
		hammer(t, func() (bool, error) {
			d, err := h.store.Check(ctx, r)
			if err != nil || !d.Allowed {
				return false, err
			}
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			inFlight.Add(-1)
			return true, h.store.Refund(ctx, r)
		})
		if got := most.Load(); got > l.Rate {
			t.Errorf("most in flight: got %d, want at most %d", got, l.Rate)
		}
		h.wantRemaining("every lease released", r.Keys[0].Key, l, l.Rate)
	})
}
