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
// A limit with ChargeDenied charges denied checks too, as
// envoyproxy/ratelimit counts, saturating at Rate+1 ("over"):
//
//	count' = min(count + cost, Rate+1), allowed or denied
//	allowed ⇔ count + cost ≤ Rate (so every check, cost 0 included, is denied while the window is over)
//	remaining = max(Rate − count', 0): 0 when denied
//
// A cost above Rate is denied with retry-after Never and charged too.
//
// State.T packs the window and its count into one int64: start + count×u,
// with u = ⌊P/(top+1)⌋ ≥ 1 where top, the most the count holds, is Rate
// (Rate+1 with ChargeDenied), so that count×u < P and both decode
// exactly.
//
// Trade-off: one int64 per key and the cheapest check, but up to 2×Rate
// can pass within one Period around a window boundary (Rate at the end of
// one window, Rate at the start of the next).
func FixedWindow(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	p := Prepare(l)
	var r Result
	s.T = p.word((*Params).fixedWindow, s.T, now, cost, &r)
	return s, r
}

func (p *Params) fixedWindow(t, now, cost int64, r *Result) int64 {
	rate := p.Limit.Rate
	start, end, st := p.windowOf(t, now)
	if st != t { // read as fresh: kept unless the check charges (see word)
		if n := p.fixedWindow(0, now, cost, r); n != 0 {
			return n
		}
		return t
	}
	now = max(now, start) // see windowOf
	count := p.count(t, start)
	reset := end - now
	if cost > rate {
		if p.Limit.ChargeDenied && count < p.top {
			t, count = start+p.top*p.unit, p.top
		}
		if count == 0 {
			reset = 0 // nothing counted: nothing to reset, as for every other cost
		}
		*r = never(rate-count, reset)
		return t
	}
	if count+cost > rate {
		if p.Limit.ChargeDenied && cost > 0 && count < p.top {
			// count + cost > Rate saturates at top, Rate+1.
			t, count = start+p.top*p.unit, p.top
		}
		*r = Result{Remaining: max(rate-count, 0), ResetAfter: time.Duration(reset), RetryAfter: time.Duration(reset)}
		return t
	}
	count += cost
	if cost > 0 {
		t = start + count*p.unit
	}
	*r = Result{Allowed: true, Remaining: rate - count}
	if count > 0 {
		r.ResetAfter = time.Duration(reset)
	}
	return t
}

// Window returns the fixed window that holds now, in Unix nanoseconds:
// start <= now < end. Windows are Period long from the Unix epoch, or a
// calendar limit's days, weeks or months.
func (p *Params) Window(now int64) (start, end int64) {
	if p.cal != nil {
		return p.cal.At(now)
	}
	start = windowStart(now, p.period)
	return start, start + p.period
}

// windowAt is Window for an instant that need not be now's (a state's).
func (p *Params) windowAt(t int64) (start, end int64) {
	if p.cal != nil {
		return p.cal.Of(t)
	}
	start = windowStart(t, p.period)
	return start, start + p.period
}

// windowOf returns the window a check at now works in: now's, or the
// window that state t was written in if that is later. A clock that
// stepped back (another instance's, a failed-over Redis's) then counts
// in the newer window instead of wiping it; the check moves now to that
// window's start. Buckets need no such care: max(T, now) does it.
//
// A calendar limit's state from beyond the window after now's is read as
// fresh, t then 0: the Redis store's script knows no window further
// ahead (lua/algo.lua), and only a clock that stepped back by a window
// or more writes one.
func (p *Params) windowOf(t, now int64) (start, end, state int64) {
	start, end = p.Window(now)
	if t < end {
		return start, end, t
	}
	ns, ne := p.windowAt(t)
	if p.cal != nil && ns != end {
		return start, end, 0
	}
	return ns, ne, t
}

// count decodes the count that t packs for the window that starts at
// start, where t is before the window's end: 0 when t is from an earlier
// window.
func (p *Params) count(t, start int64) int64 {
	if t < start {
		return 0
	}
	return (t - start) / p.unit
}

// windowCount decodes the count that t packs for the window that starts
// at start: 0 when t belongs to another window.
func (p *Params) windowCount(t, start int64) int64 {
	if windowStart(t, p.period) != start {
		return 0
	}
	return (t - start) / p.unit
}

// notBeforeWindow returns now, or the start of the window that state t was
// written in if that is later: a clock that stepped back (another
// instance's, a failed-over Redis's) then counts in the newer window
// instead of wiping it. Buckets need no such care: max(T, now) does it.
func (p *Params) notBeforeWindow(t, now int64) int64 {
	return max(now, windowStart(t, p.period))
}

func (p *Params) fixedWindowExpiry(t int64) int64 {
	start, end := p.windowAt(t)
	if p.count(t, start) == 0 {
		return 0
	}
	return end
}

func (p *Params) refundFixedWindow(t, now, n int64) int64 {
	start, _, st := p.windowOf(t, now)
	if st != t {
		return 0 // read as fresh: nothing to give back
	}
	count := p.count(t, start)
	if count == 0 {
		return t
	}
	return start + max(count-n, 0)*p.unit
}

// chargeFixedWindow is the fixed window's debt: it counts cost more units
// in the current window, past Rate, saturating at the most the packing
// holds (top: Rate, or Rate+1 with ChargeDenied). Until the window ends,
// a full window denies every check of cost 1 or more with retry-after the
// window's end, as a deeper count would; the window's end forgives the
// debt, however deep. What saturating loses: a refund after the charge
// gives back from the saturated count, not from the full debt.
func (p *Params) chargeFixedWindow(t, now, cost int64) int64 {
	start, _, st := p.windowOf(t, now)
	count := p.count(st, start)
	return start + min(count+min(cost, p.top), p.top)*p.unit
}
