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
// A limit with ChargeDenied charges denied checks too, to the current
// window's count, which saturates at Rate+1 as FixedWindow's does:
//
//	curr' = min(curr + cost, Rate+1), allowed or denied
//	allowed ⇔ weighted + curr + cost ≤ Rate, as above
//	remaining = max(Rate − weighted − curr', 0): 0 when denied
//	retry-after (denied) = from the charged counts
//
// So a check (a peek included) is denied while the estimate is above
// Rate, and a window that went over weighs up to Rate+1 in the next one,
// denying its start. A cost above Rate is denied with retry-after Never
// and charged too.
//
// State.T packs the current window's start and count as FixedWindow does,
// and State.N is the previous window's count — or, when (top+1)² ≤ Period
// in nanoseconds, State.T packs both counts, start + (prev×(top+1) +
// curr)×v with v = ⌊Period/(top+1)²⌋, and the state is one int64
// (Params.OneWord). top is the most a count holds: Rate, or Rate+1 with
// ChargeDenied. Without ChargeDenied, one int64 holds the state of up to
// 31 621 per second, 244 947 per minute, 1.9 million per hour.
func SlidingWindowCounter(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	p := Prepare(l)
	if p.OneWord() {
		var r Result
		s.T, r = p.CheckWord(s.T, now, cost)
		return s, r
	}
	return p.counter(s, now, cost)
}

func (p *Params) slidingWindowCounter(s State, now, cost int64) (State, Result) {
	period, rate := p.period, p.Limit.Rate
	now = p.notBeforeWindow(s.T, now)
	start := windowStart(now, period)
	curr, prev := p.slidingWindowCounts(s, start)
	elapsed := now - start
	weighted := mulDivCeil(prev, period-elapsed, period, p.top)
	if cost > rate || weighted+curr+cost > rate {
		return p.slidingWindowDenied(s, start, now, curr, prev, weighted, cost)
	}
	curr += cost
	if cost > 0 {
		s = p.slidingWindowState(start, curr, prev)
	}
	return s, Result{
		Allowed:    true,
		Remaining:  rate - weighted - curr,
		ResetAfter: time.Duration(slidingWindowReset(start, period, now, curr, prev)),
	}
}

// slidingWindowDenied is a denied check's state and result, given the
// counts of the window starting at start and the previous window's
// weight at now.
func (p *Params) slidingWindowDenied(s State, start, now, curr, prev, weighted, cost int64) (State, Result) {
	rate := p.Limit.Rate
	if p.Limit.ChargeDenied && cost > 0 && curr < p.top {
		curr = min(curr+min(cost, p.top), p.top)
		s = p.slidingWindowState(start, curr, prev)
	}
	reset := slidingWindowReset(start, p.period, now, curr, prev)
	if cost > rate {
		return s, never(rate-weighted-curr, reset)
	}
	return s, Result{
		Remaining:  max(rate-weighted-curr, 0),
		ResetAfter: time.Duration(reset),
		RetryAfter: time.Duration(p.slidingWindowRetry(start, now, curr, prev, cost)),
	}
}

// slidingWindowCounts returns the counts of the window starting at start
// and of the one before it, rolling the stored windows forward.
func (p *Params) slidingWindowCounts(s State, start int64) (curr, prev int64) {
	stored := windowStart(s.T, p.period)
	c, pv := p.storedCounts(s, stored)
	switch stored {
	case start:
		return c, pv
	case start - p.period:
		return 0, c
	}
	return 0, 0
}

// storedCounts decodes the counts that s holds for the window starting at
// stored, the window s.T lies in.
func (p *Params) storedCounts(s State, stored int64) (curr, prev int64) {
	if p.pair > 0 {
		x := (s.T - stored) / p.pair
		return x % (p.top + 1), x / (p.top + 1)
	}
	return p.windowCount(s.T, stored), s.N
}

// slidingWindowState encodes the counts of the window starting at start.
func (p *Params) slidingWindowState(start, curr, prev int64) State {
	if p.pair > 0 {
		return State{T: start + (prev*(p.top+1)+curr)*p.pair}
	}
	return State{T: start + curr*p.unit, N: prev}
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
func (p *Params) slidingWindowRetry(start, now, curr, prev, cost int64) int64 {
	period, ticks := p.period, p.period/p.tick
	if room := p.Limit.Rate - curr - cost; room >= 0 && prev > 0 {
		// ⌈prev×(P−e)/P⌉ ≤ room ⇔ P − e ≤ ⌊room×P/prev⌋, in ticks.
		at := period - mulDiv(room, ticks, prev, ticks)*p.tick
		if at < period {
			return max(start+at-now, 0)
		}
	}
	room := p.Limit.Rate - cost
	at := int64(0)
	if curr > room {
		at = period - mulDiv(room, ticks, curr, ticks)*p.tick
	}
	return start + period + at - now
}

func (p *Params) slidingWindowCounterExpiry(s State) int64 {
	period := p.period
	start := windowStart(s.T, period)
	curr, prev := p.storedCounts(s, start)
	if curr > 0 {
		return start + 2*period
	}
	if prev > 0 {
		return start + period
	}
	return 0
}

func (p *Params) refundSlidingWindowCounter(s State, now, n int64) State {
	now = p.notBeforeWindow(s.T, now)
	start := windowStart(now, p.period)
	curr, prev := p.slidingWindowCounts(s, start)
	if curr == 0 && prev == 0 {
		return s
	}
	take := min(n, curr)
	curr -= take
	prev = max(prev-(n-take), 0)
	return p.slidingWindowState(start, curr, prev)
}

// chargeSlidingWindowCounter is the sliding window counter's debt: it
// counts cost more units in the current window, past Rate, saturating at
// the most a count holds (top: Rate, or Rate+1 with ChargeDenied), as the
// packing requires. The window then denies every check of cost 1 or more,
// and weighs as a full window in the next one. What saturating loses: the
// part of a debt past a full window, in this window and in its weight in
// the next, and a refund gives back from the saturated count.
func (p *Params) chargeSlidingWindowCounter(s State, now, cost int64) State {
	now = p.notBeforeWindow(s.T, now)
	start := windowStart(now, p.period)
	curr, prev := p.slidingWindowCounts(s, start)
	return p.slidingWindowState(start, min(curr+min(cost, p.top), p.top), prev)
}
