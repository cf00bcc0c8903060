package algo_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/storetest"
)

// TestScenarios runs the shared step tables against the algorithms
// directly, one state standing for one key.
func TestScenarios(t *testing.T) {
	for _, sc := range storetest.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			var s algo.State
			for i, st := range sc.Steps {
				now := storetest.Start.Add(st.At).UnixNano()
				switch {
				case st.Refund:
					s = algo.Refund(sc.Limit, s, now, st.Cost)
					continue
				case st.Charge:
					s = algo.Charge(sc.Limit, s, now, st.Cost)
					continue
				}
				var r algo.Result
				s, r = algo.Check(sc.Limit, s, now, st.Cost)
				if got := storetest.Want(r); got != st.Want {
					t.Errorf("step %d (at %v, cost %d): got %v, want %v", i, st.At, st.Cost, got, st.Want)
				}
			}
		})
	}
}

// TestBucketsAgree checks that TokenBucket, GCRA and the policing
// LeakyBucket, three separate pieces of code, decide every check alike,
// and that shaping admits the same checks, differing only in Delay.
func TestBucketsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		rate := 1 + rng.Int64N(20)
		l := bouncer.Limit{Rate: rate, Period: time.Duration(rate + rng.Int64N(1000)), Burst: 1 + rng.Int64N(10)}
		if rng.IntN(2) == 0 {
			l.Period *= time.Millisecond
		}
		limits := []bouncer.Limit{l, l, l, l}
		limits[0].Algorithm, limits[1].Algorithm, limits[2].Algorithm = bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket
		limits[3].Algorithm, limits[3].Shape = bouncer.LeakyBucket, true
		states := make([]algo.State, len(limits))
		now := storetest.Start.UnixNano()
		for step := range 50 {
			now += rng.Int64N(int64(l.Interval()) * (l.Burst + 1))
			cost := rng.Int64N(l.Burst + 2)
			if rng.IntN(6) == 0 {
				for i := range states {
					states[i] = algo.Refund(limits[i], states[i], now, cost)
				}
				continue
			}
			var results [4]algo.Result
			for i := range states {
				states[i], results[i] = algo.Check(limits[i], states[i], now, cost)
			}
			shaped := results[3]
			shaped.Delay = 0
			for i, r := range []algo.Result{results[1], results[2], shaped} {
				if r != results[0] {
					t.Fatalf("%v, step %d, cost %d: %v gives %+v, token_bucket %+v", l, step, cost, limits[i+1], r, results[0])
				}
			}
		}
	}
}

// TestCheckKeepsEntries checks what stores rely on to discard a check:
// Check never writes the entries of the State it is given.
func TestCheckKeepsEntries(t *testing.T) {
	for _, a := range []bouncer.Algorithm{bouncer.SlidingWindowLog, bouncer.Concurrency} {
		l := bouncer.Limit{Algorithm: a, Rate: 5, Period: time.Second}
		now := storetest.Start.UnixNano()
		var s algo.State
		s, _ = algo.Check(l, s, now, 2)
		s, _ = algo.Check(l, s, now+int64(time.Millisecond), 1)
		want := append([]algo.Entry(nil), s.Log...)
		for _, cost := range []int64{0, 1, 2, 3, 6} {
			for _, at := range []time.Duration{0, time.Millisecond, 500 * time.Millisecond, 2 * time.Second} {
				algo.Check(l, s, now+int64(at), cost)
			}
		}
		for i := range want {
			if s.Log[i] != want[i] {
				t.Errorf("%v: entry %d after checks: got %+v, want %+v", a, i, s.Log[i], want[i])
			}
		}
	}
}

// TestCheckWordInto checks that CheckWordInto sets every field of the
// Result it is given, whatever was there, and decides as Check.
func TestCheckWordInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	algos := []bouncer.Algorithm{bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket, bouncer.FixedWindow, 0}
	for range 2000 {
		l := bouncer.Limit{
			Name:      "w",
			Algorithm: algos[rng.IntN(len(algos))],
			Rate:      1 + rng.Int64N(10),
			Period:    time.Duration(1 + rng.Int64N(int64(time.Second))),
			Shape:     rng.IntN(2) == 0,
		}
		if l.Algorithm.UsesBurst() {
			l.Burst = 1 + rng.Int64N(10)
		} else {
			l.ChargeDenied = rng.IntN(2) == 0
		}
		p := algo.Prepare(l)
		before := rng.Int64N(int64(2 * time.Second))
		now, cost := rng.Int64N(int64(2*time.Second)), rng.Int64N(12)
		wantState, want := p.Check(algo.State{T: before}, now, cost)
		got := algo.Result{Allowed: true, Remaining: -7, ResetAfter: -7, RetryAfter: -7, Delay: -7}
		if after := p.CheckWordInto(before, now, cost, &got); after != wantState.T || got != want {
			t.Fatalf("%v: CheckWordInto(%d, %d, %d) = %d, %+v; want %d, %+v", l, before, now, cost, after, got, wantState.T, want)
		}
	}
}
