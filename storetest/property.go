package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
	"pgregory.net/rapid"
)

// maxSteps bounds the checks of one random sequence, so that the default
// 100 sequences per algorithm take well under a second.
const maxSteps = 40

// propertyLimit generates small valid limits of algorithm a: rates up to
// 6, periods from a few nanoseconds (where Interval rounds) to seconds,
// and for the window algorithms, ChargeDenied or not.
func propertyLimit(a bouncer.Algorithm) *rapid.Generator[bouncer.Limit] {
	return rapid.Custom(func(t *rapid.T) bouncer.Limit {
		l := bouncer.Limit{Name: "property", Algorithm: a, Rate: rapid.Int64Range(1, 6).Draw(t, "rate")}
		windows := a == bouncer.FixedWindow || a == bouncer.SlidingWindowCounter
		l.ChargeDenied = windows && rapid.Bool().Draw(t, "charge denied")
		unit := rapid.SampledFrom([]time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second}).Draw(t, "unit")
		least := int64(1)
		if unit == time.Nanosecond {
			least = l.Rate // at most one unit per nanosecond
			switch {
			case l.ChargeDenied:
				least = l.Rate + 2 // counts up to Rate+1 need Period ≥ Rate+2
			case windows:
				least = l.Rate + 1 // windows need Period > Rate
			}
		}
		l.Period = time.Duration(rapid.Int64Range(least, 40).Draw(t, "periods")) * unit
		if a.UsesBurst() {
			l.Burst = rapid.Int64Range(1, 6).Draw(t, "burst")
			l.Shape = a == bouncer.LeakyBucket && rapid.Bool().Draw(t, "shape")
		}
		return l
	})
}

// propertyAdvance generates how far the clock moves before a step: often
// not at all, sometimes by a nanosecond or two, sometimes to just around
// the next window boundary, otherwise anywhere up to three periods.
func propertyAdvance(t *rapid.T, l bouncer.Limit, now int64) time.Duration {
	p := int64(l.Period)
	switch rapid.IntRange(0, 4).Draw(t, "advance kind") {
	case 0:
		return 0
	case 1:
		return time.Duration(rapid.Int64Range(1, 2).Draw(t, "nanos"))
	case 2:
		next := (now/p + 1) * p
		return time.Duration(max(next-now+rapid.Int64Range(-1, 1).Draw(t, "around boundary"), 0))
	}
	return time.Duration(rapid.Int64Range(0, 3*p).Draw(t, "advance"))
}

// startSequence moves the shared clock forward to a drawn offset into a
// window of l, so that a sequence decides the same wherever the clock
// stood: rapid can then replay and shrink a failure.
func startSequence(t *rapid.T, clock *Clock, l bouncer.Limit) {
	p := int64(l.Period)
	base := (clock.Now().UnixNano()/p + 1) * p
	clock.Set(time.Unix(0, base+rapid.Int64Range(0, p-1).Draw(t, "offset")).UTC())
}

// testProperty compares the store with the Model of each algorithm over
// random sequences of checks, refunds and (for a store.Charger) charges, each on a fresh key of one
// store whose clock only moves forward.
func testProperty(t *testing.T, newStore Factory) {
	for _, a := range bouncer.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, newStore)
			rapid.Check(t, func(rt *rapid.T) {
				l := propertyLimit(a).Draw(rt, "limit")
				startSequence(rt, h.clock, l)
				keys := []bouncer.KeyLimits{{Key: freshKey("property"), Limits: []bouncer.Limit{l}}}
				m := NewModel(l)
				steps := rapid.IntRange(1, maxSteps).Draw(rt, "steps")
				for i := range steps {
					h.clock.Advance(propertyAdvance(rt, l, h.clock.Now().UnixNano()))
					now := h.clock.Now().UnixNano()
					if c, ok := h.store.(store.Charger); ok && store.Chargeable(l) && rapid.IntRange(0, 5).Draw(rt, "charge?") == 0 {
						r := bouncer.Request{Keys: keys, Cost: rapid.Int64Range(1, 2*l.Capacity()+1).Draw(rt, "charge")}
						if err := c.Charge(context.Background(), r); err != nil {
							rt.Fatalf("step %d: Charge(%d): %v", i, r.Cost, err)
						}
						m.Charge(now, r.Cost)
						continue
					}
					r := request(rapid.Int64Range(0, l.Capacity()+1).Draw(rt, "cost"), keys...)
					if rapid.IntRange(0, 5).Draw(rt, "refund?") == 0 {
						if err := h.store.Refund(context.Background(), r); err != nil {
							rt.Fatalf("step %d: Refund(%d): %v", i, r.Cost, err)
						}
						m.Refund(now, r.Cost)
						continue
					}
					d, err := h.store.Check(context.Background(), r)
					if err != nil {
						rt.Fatalf("step %d: Check(%d): %v", i, r.Cost, err)
					}
					if got, want := WantOf(d), m.Check(now, r.Cost); got != want {
						rt.Fatalf("step %d (%v, at +%v, cost %d): got %v, want %v", i, l, time.Duration(now-Start.UnixNano()), r.Cost, got, want)
					}
				}
			})
		})
	}

	t.Run("sliding_window_log_exact", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, newStore)
		rapid.Check(t, func(rt *rapid.T) {
			l := propertyLimit(bouncer.SlidingWindowLog).Draw(rt, "limit")
			startSequence(rt, h.clock, l)
			keys := []bouncer.KeyLimits{{Key: freshKey("exact"), Limits: []bouncer.Limit{l}}}
			type admitted struct{ at, n int64 }
			var log []admitted
			for i := range rapid.IntRange(1, maxSteps).Draw(rt, "steps") {
				h.clock.Advance(propertyAdvance(rt, l, h.clock.Now().UnixNano()))
				now := h.clock.Now().UnixNano()
				r := bouncer.Request{Keys: keys, Cost: rapid.Int64Range(1, l.Rate).Draw(rt, "cost")}
				d, err := h.store.Check(context.Background(), r)
				if err != nil {
					rt.Fatalf("step %d: Check(%d): %v", i, r.Cost, err)
				}
				if !d.Allowed {
					continue
				}
				log = append(log, admitted{now, r.Cost})
				var inWindow int64
				for _, e := range log {
					if e.at > now-int64(l.Period) {
						inWindow += e.n
					}
				}
				if inWindow > l.Rate {
					rt.Fatalf("step %d (%v): %d units admitted in the window ending at +%v, want at most %d", i, l, inWindow, time.Duration(now-Start.UnixNano()), l.Rate)
				}
			}
		})
	})
}
