package fairshare

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

var inf = math.Inf(1)

// tolerance is the relative error float sums may carry.
const tolerance = 1e-9

func TestShares(t *testing.T) {
	tests := []struct {
		name     string
		capacity float64
		demands  []float64
		want     []float64
		level    float64
	}{
		{"no demands", 10, nil, nil, inf},
		{"capacity covers all", 100, []float64{10, 20, 30}, []float64{10, 20, 30}, inf},
		{"capacity exactly covers all", 30, []float64{20, 10}, []float64{20, 10}, 20},
		{"small demands first", 1000, []float64{1400, 400, 200}, []float64{400, 400, 200}, 400},
		{"equal demands split equally", 90, []float64{100, 100, 100}, []float64{30, 30, 30}, 30},
		{"infinite demand takes what is left", 100, []float64{inf, 20}, []float64{80, 20}, 80},
		{"infinite demands split equally", 100, []float64{inf, inf, inf, inf}, []float64{25, 25, 25, 25}, 25},
		{"zero demands", 10, []float64{0, 0}, []float64{0, 0}, inf},
		{"negative demand counts as zero", 10, []float64{-5, 20}, []float64{0, 10}, 10},
		{"zero capacity", 0, []float64{5, inf}, []float64{0, 0}, 0},
		{"negative capacity counts as zero", -10, []float64{5, 1}, []float64{0, 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			demands := slices.Clone(tt.demands)
			if got := Shares(tt.capacity, demands); !slices.Equal(got, tt.want) {
				t.Errorf("Shares(%v, %v) = %v, want %v", tt.capacity, tt.demands, got, tt.want)
			}
			if !slices.Equal(demands, tt.demands) {
				t.Errorf("Shares changed its demands to %v", demands)
			}
			level, used := Level(tt.capacity, demands)
			if level != tt.level {
				t.Errorf("Level(%v, %v) = %v, want level %v", tt.capacity, tt.demands, level, tt.level)
			}
			if want := sum(tt.want); used != want {
				t.Errorf("Level(%v, %v) used %v, want %v", tt.capacity, tt.demands, used, want)
			}
		})
	}
}

// The division's properties, for any capacity and demands: the shares
// never add up past the capacity nor exceed a demand, use the capacity
// up to what is asked, add up to what Level says they use, and are
// max-min fair: a share short of its demand is at least any other share.
func TestSharesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.OneOf(rapid.Just(0.0), rapid.Float64Range(-10, 1e6)).Draw(t, "capacity")
		demand := rapid.OneOf(rapid.Float64Range(0, 1e6), rapid.Just(0.0), rapid.Just(inf), rapid.Float64Range(-1e6, 0))
		demands := rapid.SliceOfN(demand, 0, 20).Draw(t, "demands")
		shares := Shares(capacity, demands)
		if len(shares) != len(demands) {
			t.Fatalf("got %d shares of %d demands", len(shares), len(demands))
		}
		asked := 0.0
		for i, s := range shares {
			asked += max(demands[i], 0)
			if s < 0 || s > max(demands[i], 0) {
				t.Fatalf("share %d: got %v of demand %v, want within [0, demand]", i, s, demands[i])
			}
		}
		total := sum(shares)
		if room := max(capacity, 0); total > room*(1+tolerance) {
			t.Fatalf("shares add up to %v, past the capacity %v", total, capacity)
		}
		if want := min(max(capacity, 0), asked); total < want*(1-tolerance) {
			t.Fatalf("shares add up to %v, want %v used", total, want)
		}
		if _, used := Level(capacity, slices.Clone(demands)); math.Abs(used-total) > tolerance*max(used, 1) {
			t.Fatalf("shares add up to %v, Level says %v", total, used)
		}
		for i, s := range shares {
			if s >= demands[i] {
				continue
			}
			for j, o := range shares {
				if o > s*(1+tolerance) {
					t.Fatalf("share %d (%v, short of its demand %v) below share %d (%v)", i, s, demands[i], j, o)
				}
			}
		}
	})
}

func sum(xs []float64) float64 {
	total := 0.0
	for _, x := range xs {
		total += x
	}
	return total
}

// A NaN demand or capacity counts as zero, as a negative one does,
// instead of making every share NaN.
func TestSharesNaN(t *testing.T) {
	nan := math.NaN()
	if got, want := Shares(10, []float64{nan, 4, 20}), []float64{0, 4, 6}; !slices.Equal(got, want) {
		t.Errorf("Shares(10, [NaN 4 20]) = %v, want %v", got, want)
	}
	if got, want := Shares(nan, []float64{4, 20}), []float64{0, 0}; !slices.Equal(got, want) {
		t.Errorf("Shares(NaN, [4 20]) = %v, want %v", got, want)
	}
	if level, used := Level(10, []float64{nan, nan}); level != inf || used != 0 {
		t.Errorf("Level(10, [NaN NaN]) = %v, %v; want +Inf, 0", level, used)
	}
}
