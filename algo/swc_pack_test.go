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
		period := rapid.Int64Range((rate+1)*(rate+1), 4*(rate+1)*(rate+1)+100).Draw(t, "period")
		l := bouncer.Limit{Name: "swc", Algorithm: bouncer.SlidingWindowCounter, Rate: rate, Period: time.Duration(period)}
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
			cost := rapid.Int64Range(0, rate+1).Draw(t, "cost")
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

// The bound on packing: (Rate+1)² ≤ Period in nanoseconds.
func TestSlidingWindowCounterPacksWhenTheCountsFit(t *testing.T) {
	for _, tt := range []struct {
		rate   int64
		period time.Duration
		want   bool
	}{
		{100, time.Minute, true},
		{31_621, time.Second, true},
		{31_622, time.Second, false},
		{1 << 40, bouncer.MaxPeriod, false},
	} {
		p := Prepare(bouncer.Limit{Algorithm: bouncer.SlidingWindowCounter, Rate: tt.rate, Period: tt.period})
		if got := p.OneWord(); got != tt.want {
			t.Errorf("%d per %v: OneWord() = %v, want %v", tt.rate, tt.period, got, tt.want)
		}
	}
}
