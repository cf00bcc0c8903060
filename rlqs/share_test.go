package rlqs

import (
	"testing"
	"time"
)

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
