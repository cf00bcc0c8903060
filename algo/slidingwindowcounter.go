package algo

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// SlidingWindowCounter approximates a sliding window from two fixed
// windows' counts, weighing the previous one by the part of it the sliding
// window still covers. With e = now − start, the elapsed part of the
// current window:
//
//	weighted = ⌈prev × (P − e) / P⌉
//	allowed ⇔ weighted + curr + cost ≤ Rate
//	remaining = Rate − weighted − curr'
//	reset-after = until both counts have aged out
//
// The estimate assumes the previous window's units were spread evenly; it
// can admit more than Rate in a true sliding Period when they bunched at
// its end, and fewer when they bunched at its start (docs/algorithms.md
// measures the error). Rounding the weight up never admits more than the
// exact formula.
//
// State.T packs the current window's start and count as FixedWindow does;
// State.N is the previous window's count. Two int64s per key.
func SlidingWindowCounter(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	period := int64(l.Period)
	start := windowStart(now, period)
	curr, prev := slidingWindowCounts(l, s, start)
	elapsed := now - start
	weighted := mulDivCeil(prev, period-elapsed, period, l.Rate)
	reset := slidingWindowReset(start, period, now, curr, prev)
	if cost > l.Rate {
		return s, never(l.Rate-weighted-curr, reset)
	}
	if weighted+curr+cost > l.Rate {
		return s, Result{
			Remaining:  max(l.Rate-weighted-curr, 0),
			ResetAfter: time.Duration(reset),
			RetryAfter: time.Duration(slidingWindowRetry(l, start, now, curr, prev, cost)),
		}
	}
	curr += cost
	if cost > 0 {
		s.T = start + curr*fixedWindowUnit(l)
		s.N = prev
	}
	return s, Result{
		Allowed:    true,
		Remaining:  l.Rate - weighted - curr,
		ResetAfter: time.Duration(slidingWindowReset(start, period, now, curr, prev)),
	}
}

// slidingWindowCounts returns the counts of the window starting at start
// and of the one before it, rolling the stored windows forward.
func slidingWindowCounts(l bouncer.Limit, s State, start int64) (curr, prev int64) {
	period := int64(l.Period)
	stored := windowStart(s.T, period)
	switch stored {
	case start:
		return fixedWindowCount(l, s.T, stored), s.N
	case start - period:
		return 0, fixedWindowCount(l, s.T, stored)
	}
	return 0, 0
}

func slidingWindowReset(start, period, now, curr, prev int64) int64 {
	switch {
	case curr > 0:
		return start + 2*period - now
	case prev > 0:
		return start + period - now
	}
	return 0
}

// slidingWindowRetry returns how long until a check of cost passes: later
// in this window if the previous window's weight can fall far enough,
// otherwise in the next window, once this window's count weighs little
// enough.
func slidingWindowRetry(l bouncer.Limit, start, now, curr, prev, cost int64) int64 {
	period := int64(l.Period)
	if room := l.Rate - curr - cost; room >= 0 && prev > 0 {
		// ⌈prev×(P−e)/P⌉ ≤ room ⇔ P − e ≤ ⌊room×P/prev⌋.
		at := period - mulDiv(room, period, prev, period)
		if at < period {
			return max(start+at-now, 0)
		}
	}
	room := l.Rate - cost
	at := int64(0)
	if curr > room {
		at = period - mulDiv(room, period, curr, period)
	}
	return start + period + at - now
}

func slidingWindowCounterExpiry(l bouncer.Limit, s State) int64 {
	period := int64(l.Period)
	start := windowStart(s.T, period)
	if fixedWindowCount(l, s.T, start) > 0 {
		return start + 2*period
	}
	if s.N > 0 {
		return start + period
	}
	return 0
}

func refundSlidingWindowCounter(l bouncer.Limit, s State, now, n int64) State {
	period := int64(l.Period)
	start := windowStart(now, period)
	curr, prev := slidingWindowCounts(l, s, start)
	if curr == 0 && prev == 0 {
		return s
	}
	take := min(n, curr)
	curr -= take
	prev = max(prev-(n-take), 0)
	s.T = start + curr*fixedWindowUnit(l)
	s.N = prev
	return s
}
