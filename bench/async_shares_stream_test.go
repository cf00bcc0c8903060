package bench

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestSharesStream checks BenchmarkAsyncShares's workload: as many
// arrivals as the load asks for, spread over the instances as the case
// says, the same for the same seed.
func TestSharesStream(t *testing.T) {
	l := sharesLimits[0].l
	end := time.Duration(1+sharesWindows()) * sharesSpan
	move := sharesSpan + time.Duration(sharesWindows())*sharesSpan/2
	tests := []struct {
		c             sharesCase
		before, after []float64 // shares of the instances before and after move
	}{
		{sharesCase{"even", 3}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{sharesCase{"skew", 1}, []float64{0.7, 0.2, 0.1}, []float64{0.7, 0.2, 0.1}},
		{sharesCase{"moving", 3}, []float64{0.7, 0.2, 0.1}, []float64{0.1, 0.2, 0.7}},
	}
	for _, tt := range tests {
		t.Run(tt.c.spread, func(t *testing.T) {
			s := sharesStream(tt.c, l, 1)
			if !slices.Equal(s, sharesStream(tt.c, l, 1)) {
				t.Fatal("two streams of one seed differ")
			}
			want := tt.c.load * 150 * end.Seconds()
			if got := float64(len(s)); math.Abs(got-want) > 0.05*want {
				t.Errorf("got %v arrivals, want %v ± 5 %%", got, want)
			}
			var before, after [sharesInstances]float64
			var nBefore, nAfter float64
			for i, a := range s {
				if a.at < 0 || a.at >= end || i > 0 && a.at < s[i-1].at {
					t.Fatalf("arrival %d at %v: want in order, in [0, %v)", i, a.at, end)
				}
				if a.at < move {
					before[a.instance]++
					nBefore++
				} else {
					after[a.instance]++
					nAfter++
				}
			}
			for i := range sharesInstances {
				if got := before[i] / nBefore; math.Abs(got-tt.before[i]) > 0.04 {
					t.Errorf("instance %d had %.3f of the arrivals before %v, want %.3f", i, got, move, tt.before[i])
				}
				if got := after[i] / nAfter; math.Abs(got-tt.after[i]) > 0.04 {
					t.Errorf("instance %d had %.3f of the arrivals from %v, want %.3f", i, got, move, tt.after[i])
				}
			}
		})
	}
}

// TestSharesStart checks that a run begins at a window boundary, the one
// just past if it is recent enough.
func TestSharesStart(t *testing.T) {
	b := time.Unix(1_800_000_000, 0) // a multiple of sharesSpan
	tests := []struct {
		now, want time.Time
	}{
		{b, b},
		{b.Add(sharesLate), b},
		{b.Add(sharesLate + 1), b.Add(sharesSpan)},
		{b.Add(sharesSpan - 1), b.Add(sharesSpan)},
	}
	for _, tt := range tests {
		if got := sharesStart(tt.now); !got.Equal(tt.want) {
			t.Errorf("sharesStart(%v) = %v, want %v", tt.now.Sub(b), got.Sub(b), tt.want.Sub(b))
		}
	}
}
