package algo

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"pgregory.net/rapid"
)

// A sliding window counter whose two counts are packed into State.T
// decides exactly as the same limit keeping them in T and N.
func TestSlidingWindowCounterPackingDecidesTheSame(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Int64Range(1, 40).Draw(t, "rate")
		charge := rapid.Bool().Draw(t, "charge denied")
		top := rate // the most a count holds
		if charge {
			top++
		}
		period := rapid.Int64Range((top+1)*(top+1), 4*(top+1)*(top+1)+100).Draw(t, "period")
		l := bouncer.Limit{Name: "swc", Algorithm: bouncer.SlidingWindowCounter, Rate: rate, Period: time.Duration(period), ChargeDenied: charge}
		if err := l.Validate(); err != nil {
			t.Fatalf("invalid limit %v: %v", l, err)
		}
		packed := Prepare(l)
		if !packed.OneWord() {
			t.Fatalf("limit %v: OneWord() = false, want true", l)
		}
		plain := packed
		plain.pair = 0
		var ps, qs State
		now := int64(1_700_000_000_000_000_000)
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			now += rapid.Int64Range(0, 2*period).Draw(t, "advance")
			cost := rapid.Int64Range(0, rate+2).Draw(t, "cost")
			if rapid.IntRange(0, 5).Draw(t, "op") == 0 {
				ps, qs = packed.Refund(ps, now, cost), plain.Refund(qs, now, cost)
			} else {
				var pr, qr Result
				ps, pr = packed.Check(ps, now, cost)
				qs, qr = plain.Check(qs, now, cost)
				if pr != qr {
					t.Fatalf("step %d: packed %+v, plain %+v", i, pr, qr)
				}
			}
			if pe, qe := packed.Expiry(ps), plain.Expiry(qs); pe != qe {
				t.Fatalf("step %d: expiry packed %d, plain %d", i, pe, qe)
			}
		}
	})
}

// The bound on packing: (Rate+1)² ≤ Period in nanoseconds, or (Rate+2)²
// when denied checks are charged (counts go up to Rate+1).
func TestSlidingWindowCounterPacksWhenTheCountsFit(t *testing.T) {
	for _, tt := range []struct {
		rate   int64
		period time.Duration
		charge bool
		want   bool
	}{
		{100, time.Minute, false, true},
		{31_621, time.Second, false, true},
		{31_622, time.Second, false, false},
		{1 << 40, bouncer.MaxPeriod, false, false},
		{31_620, time.Second, true, true},
		{31_621, time.Second, true, false},
		{3, 25, true, true},
		{3, 24, true, false},
	} {
		p := Prepare(bouncer.Limit{Algorithm: bouncer.SlidingWindowCounter, Rate: tt.rate, Period: tt.period, ChargeDenied: tt.charge})
		if got := p.OneWord(); got != tt.want {
			t.Errorf("%d per %v, charge denied %t: OneWord() = %v, want %v", tt.rate, tt.period, tt.charge, got, tt.want)
		}
	}
}

// The packing unit of a fixed window: ⌊P/(Rate+1)⌋, or ⌊P/(Rate+2)⌋ when
// denied checks are charged, so that a count of Rate+1 fits; limits
// without ChargeDenied keep theirs. A window of Fine or more counts in
// whole microseconds.
func TestFixedWindowPacking(t *testing.T) {
	for _, tt := range []struct {
		rate   int64
		period time.Duration
		charge bool
		want   int64
	}{
		{10, time.Second, false, 90_909_090},
		{10, time.Second, true, 83_333_333},
		{10, 11, false, 1},
		{10, 12, true, 1},
		{bouncer.MaxRate, bouncer.MaxPeriod, true, int64(bouncer.MaxPeriod) / Microsecond / (bouncer.MaxRate + 2) * Microsecond},
		{1, Fine - 1, false, (Fine - 1) / 2},
		{1, Fine + 1, false, (Fine/Microsecond + 1) / 2 * Microsecond},
	} {
		p := Prepare(bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: tt.rate, Period: tt.period, ChargeDenied: tt.charge})
		if unit, _ := p.Packing(); unit != tt.want {
			t.Errorf("%d per %v, charge denied %t: unit %d, want %d", tt.rate, tt.period, tt.charge, unit, tt.want)
		}
	}
}
