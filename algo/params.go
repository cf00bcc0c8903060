package algo

import "github.com/bouncerhq/bouncer"

// Params are a limit with the numbers its algorithm derives from it,
// computed once by Prepare, so that a store checking one limit many times
// divides no more than it must. A Params is read-only once prepared and
// safe for concurrent use.
type Params struct {
	Limit    bouncer.Limit
	period   int64 // Period in nanoseconds
	interval int64 // ⌈Period/Rate⌉, at least 1
	span     int64 // Burst × interval: a bucket's capacity in nanoseconds
	top      int64 // the most a window's count holds: Rate, or Rate+1 ("over") when the limit charges denied checks
	unit     int64 // ⌊Period/(top+1)⌋, at least 1: packs a window's count
	pair     int64 // ⌊Period/(top+1)²⌋ when at least 1: packs a sliding window counter's two counts; else 0
}

// Prepare derives l's Params. l should be valid (bouncer.Limit.Validate);
// an invalid l gives Params that decide without panicking.
func Prepare(l bouncer.Limit) Params {
	p := Params{Limit: l, period: max(int64(l.Period), 1)}
	p.interval = max(int64(l.Interval()), 1)
	p.span = l.Burst * p.interval
	p.top = l.Rate
	if l.ChargeDenied && (l.Algorithm == bouncer.FixedWindow || l.Algorithm == bouncer.SlidingWindowCounter) {
		p.top++ // a denied check leaves the count at Rate+1
	}
	p.unit = max(p.period/max(p.top+1, 1), 1) // Rate −1 must not divide by 0
	if l.Algorithm == bouncer.SlidingWindowCounter && p.top >= 0 {
		// (top+1)² ≤ Period without squaring: Rate may be 2⁴⁰.
		if q := p.period / (p.top + 1); q >= p.top+1 {
			p.pair = q / (p.top + 1)
		}
	}
	return p
}

// OneWord reports whether this limit's whole state is State.T: always for
// the algorithms of the package function OneWord, and for a sliding
// window counter whose two counts fit in it.
func (p *Params) OneWord() bool { return OneWord(p.Limit.Algorithm) || p.pair > 0 }

// Packing returns how the window algorithms pack counts into one instant:
// unit is the nanoseconds that one unit of a fixed window's count (or of a
// two-word sliding window counter's current count) adds to the window's
// start, and pair the same for a one-word sliding window counter's packed
// pair of counts (0 when they do not fit in one word). Counts go up to
// Rate, or Rate+1 for a limit with ChargeDenied, whose packing therefore
// differs. A store that keeps state outside Go, as the Redis store's
// scripts do, packs it the same way.
func (p *Params) Packing() (unit, pair int64) { return p.unit, p.pair }

// Check decides a check of cost units at now and returns the state to
// store if the check is allowed; a denied check returns s unchanged, but
// under a limit with ChargeDenied, whose denied check returns the charged
// state, to be stored as well (see the package function Check).
func (p *Params) Check(s State, now, cost int64) (State, Result) {
	if p.OneWord() {
		var r Result
		s.T, r = p.CheckWord(s.T, now, cost)
		return s, r
	}
	switch p.Limit.Algorithm {
	case bouncer.SlidingWindowLog:
		return p.slidingWindowLog(s, now, cost)
	case bouncer.SlidingWindowCounter:
		return p.slidingWindowCounter(s, now, cost)
	case bouncer.Concurrency:
		return p.concurrency(s, now, cost)
	}
	return s, Result{RetryAfter: bouncer.Never}
}

// CheckWord is Check for the limits whose state is one word
// (Params.OneWord): t is State.T. It is shorthand for CheckWordInto.
func (p *Params) CheckWord(t, now, cost int64) (int64, Result) {
	var r Result
	t = p.CheckWordInto(t, now, cost, &r)
	return t, r
}

// CheckWordInto is CheckWord storing the result in *r, all of whose fields
// it sets, and returning only the state. A Result is too large to travel
// in registers: a store's hot path that fills in its own Result saves a
// copy or two per check.
func (p *Params) CheckWordInto(t, now, cost int64, r *Result) int64 {
	switch p.Limit.Algorithm {
	case bouncer.TokenBucket:
		return p.tokenBucket(t, now, cost, r)
	case bouncer.GCRA:
		return p.gcra(t, now, cost, r)
	case bouncer.LeakyBucket:
		return p.leakyBucket(t, now, cost, r)
	case bouncer.FixedWindow:
		return p.fixedWindow(t, now, cost, r)
	case bouncer.SlidingWindowCounter:
		if p.pair > 0 {
			var s State
			s, *r = p.slidingWindowCounter(State{T: t}, now, cost)
			return s.T
		}
	}
	*r = Result{RetryAfter: bouncer.Never}
	return t
}

// Refund gives n units back at now; see the package function Refund.
func (p *Params) Refund(s State, now, n int64) State {
	if n <= 0 {
		return s
	}
	// No state holds more than two capacities' worth of units (a sliding
	// window counter's two windows; one more each when denied checks are
	// charged); bounding n keeps the arithmetic in range without giving
	// back less than was charged.
	most := p.Limit.Capacity()
	if p.Limit.ChargeDenied {
		most++
	}
	n = min(n, 2*most)
	switch p.Limit.Algorithm {
	case bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket:
		s.T = p.refundTime(s.T, now, n)
	case bouncer.FixedWindow:
		s.T = p.refundFixedWindow(s.T, now, n)
	case bouncer.SlidingWindowLog:
		return p.refundSlidingWindowLog(s, now, n)
	case bouncer.SlidingWindowCounter:
		return p.refundSlidingWindowCounter(s, now, n)
	case bouncer.Concurrency:
		return p.refundConcurrency(s, now, n)
	}
	return s
}

// Expiry returns the instant from which s equals a fresh state; see the
// package function Expiry.
func (p *Params) Expiry(s State) int64 {
	switch p.Limit.Algorithm {
	case bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket:
		return s.T
	case bouncer.FixedWindow:
		return p.fixedWindowExpiry(s.T)
	case bouncer.SlidingWindowCounter:
		return p.slidingWindowCounterExpiry(s)
	case bouncer.SlidingWindowLog:
		if len(s.Log) == 0 {
			return 0
		}
		return s.Log[len(s.Log)-1].At + p.period
	case bouncer.Concurrency:
		if len(s.Log) == 0 {
			return 0
		}
		return s.Log[len(s.Log)-1].At
	}
	return 0
}
