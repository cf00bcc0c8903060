package algo

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// FixedWindow counts units in windows of Period aligned to the Unix epoch,
// admitting up to Rate per window:
//
//	start = ⌊now/P⌋×P, count = 0 if the state is from an earlier window
//	allowed ⇔ count + cost ≤ Rate
//	remaining = Rate − count', reset-after = start + P − now (0 when count' is 0)
//	retry-after (denied) = start + P − now
//
// State.T packs the window and its count into one int64: start + count×u,
// with u = ⌊P/(Rate+1)⌋ ≥ 1, so that count×u < P and both decode exactly.
//
// Trade-off: one int64 per key and the cheapest check, but up to 2×Rate
// can pass within one Period around a window boundary (Rate at the end of
// one window, Rate at the start of the next).
func FixedWindow(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	period := int64(l.Period)
	start := windowStart(now, period)
	count := fixedWindowCount(l, s.T, start)
	reset := start + period - now
	if cost > l.Rate {
		return s, never(l.Rate-count, reset)
	}
	if count+cost > l.Rate {
		return s, Result{Remaining: max(l.Rate-count, 0), ResetAfter: time.Duration(reset), RetryAfter: time.Duration(reset)}
	}
	count += cost
	if cost > 0 {
		s.T = start + count*fixedWindowUnit(l)
	}
	r := Result{Allowed: true, Remaining: l.Rate - count}
	if count > 0 {
		r.ResetAfter = time.Duration(reset)
	}
	return s, r
}

// fixedWindowUnit is u, the spacing that packs a count into an instant.
func fixedWindowUnit(l bouncer.Limit) int64 { return max(int64(l.Period)/(l.Rate+1), 1) }

// fixedWindowCount decodes the count that t packs for the window that
// starts at start: 0 when t belongs to another window.
func fixedWindowCount(l bouncer.Limit, t, start int64) int64 {
	period := int64(l.Period)
	if windowStart(t, period) != start {
		return 0
	}
	return (t - start) / fixedWindowUnit(l)
}

func fixedWindowExpiry(l bouncer.Limit, s State) int64 {
	start := windowStart(s.T, int64(l.Period))
	if fixedWindowCount(l, s.T, start) == 0 {
		return 0
	}
	return start + int64(l.Period)
}

func refundFixedWindow(l bouncer.Limit, s State, now, n int64) State {
	start := windowStart(now, int64(l.Period))
	count := fixedWindowCount(l, s.T, start)
	if count == 0 {
		return s
	}
	s.T = start + max(count-n, 0)*fixedWindowUnit(l)
	return s
}
