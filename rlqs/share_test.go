package rlqs

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// fairShares is each demand's share under waterLevel.
func fairShares(capacity float64, demands []float64) []float64 {
	level, used := waterLevel(capacity, slices.Clone(demands))
	shares, sum := make([]float64, len(demands)), 0.0
	for i, d := range demands {
		shares[i] = max(min(d, level), 0)
		sum += shares[i]
	}
	if sum > used*(1+1e-12) {
		panic(fmt.Sprintf("shares sum to %v, the level says %v", sum, used))
	}
	return shares
}

// waterLevel is max-min fair: shares never sum past the capacity nor
// exceed a demand, and a client that gets less than it asks gets at
// least as much as any other; with enough demand the capacity is used.
func TestFairSharesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.Float64Range(0, 1e6).Draw(t, "capacity")
		demands := rapid.SliceOfN(rapid.OneOf(rapid.Float64Range(0, 1e6), rapid.Just(math.Inf(1))), 1, 20).Draw(t, "demands")
		shares := fairShares(capacity, demands)
		sum, asked := 0.0, 0.0
		for i, s := range shares {
			sum += s
			asked += demands[i]
			if s < 0 || s > demands[i] {
				t.Fatalf("share %d: %v of demand %v", i, s, demands[i])
			}
		}
		if sum > capacity*(1+1e-9) {
			t.Fatalf("shares sum to %v, past the capacity %v", sum, capacity)
		}
		if want := math.Min(capacity, asked); sum < want*(1-1e-9) {
			t.Fatalf("shares sum to %v, want %v used", sum, want)
		}
		for i, s := range shares {
			if s >= demands[i] {
				continue
			}
			for j, o := range shares {
				if o > s*(1+1e-9) {
					t.Fatalf("share %d (%v, short of its demand %v) below share %d (%v)", i, s, demands[i], j, o)
				}
			}
		}
	})
}

func TestFairSharesExample(t *testing.T) {
	got := fairShares(1000, []float64{1400, 400, 200})
	if got[0] != 400 || got[1] != 400 || got[2] != 200 {
		t.Errorf("fairShares(1000, 1400 400 200) = %v, want 400 400 200", got)
	}
}

// An assignment never admits more than its rate, comes within a
// nanosecond's rounding of it, and fills at least 50 ms at a time.
func TestAssignmentRate(t *testing.T) {
	for _, rate := range []float64{0.01, 0.2, 1, 3.3, 16.67, 999, 1000, 12345.6} {
		s := assignment(rate, time.Second)
		tb := s.GetTokenBucket()
		got := float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
		if got > rate || got < rate*(1-1e-6) || tb.GetFillInterval().AsDuration() < 50*time.Millisecond || tb.GetMaxTokens() < tb.GetTokensPerFill().GetValue() {
			t.Errorf("rate %v: assigned %v a second (%v per %v)", rate, got, tb.GetTokensPerFill().GetValue(), tb.GetFillInterval().AsDuration())
		}
		if tb.GetMaxTokens() < 1 {
			t.Errorf("rate %v: max_tokens %d", rate, tb.GetMaxTokens())
		}
	}
	if s := assignment(0, time.Second); s.GetBlanketRule().String() != "DENY_ALL" {
		t.Errorf("rate 0: %v, want DENY_ALL", s)
	}
}
