package algo

import (
	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/calendar"
)

// Params are a limit with the numbers its algorithm derives from it,
// computed once by Prepare, so that a store checking one limit many times
// divides no more than it must. A Params is read-only once prepared and
// safe for concurrent use.
type Params struct {
	Limit    bouncer.Limit
	tick     int64             // 1, or Microsecond for a long limit: see Tick
	far      int64             // Far ticks, in nanoseconds
	period   int64             // Period in nanoseconds, rounded up to a tick
	interval int64             // ⌈Period/Rate⌉ in ticks, at least 1 tick
	span     int64             // Burst × interval: a bucket's capacity in nanoseconds
	top      int64             // the most a window's count holds: Rate, or Rate+1 ("over") when the limit charges denied checks
	unit     int64             // ⌊Period/(top+1)⌋ in ticks, at least 1 tick: packs a window's count
	pair     int64             // ⌊Period/(top+1)²⌋ in ticks when at least 1 tick: packs a sliding window counter's two counts; else 0
	cal      *calendar.Windows // a calendar limit's windows; nil for windows from the epoch
}

// Units. A limit computes in nanoseconds while its horizon — the farthest
// its state reaches from now: a bucket's Burst × interval, a window's
// Period, twice it for a sliding window counter, a log's Period — is
// below Fine, and in microseconds from there on: its Period is rounded up
// to a whole microsecond, the interval is ⌈Period/Rate⌉ microseconds, and
// now is rounded down to a microsecond. Either way every value a check
// forms stays below 2⁵³ ticks, so that a store computing in doubles (the
// Redis store's Lua) gets the same integers as this package.
const (
	// Fine is the horizon, in nanoseconds, from which a limit computes
	// in microseconds: 2⁵¹ ns, about 26 days.
	Fine = 1 << 51
	// Microsecond is the tick of a limit whose horizon is Fine or more.
	Microsecond = 1000
	// Far, in ticks (2⁵² of them: 52 days in nanoseconds, 142 years in
	// microseconds), bounds how far ahead of now a state is read: a
	// one-word state (Params.OneWord) more than Far ticks ahead — which
	// only a clock that jumped by weeks writes — is read as fresh, and a
	// log's ResetAfter and RetryAfter are at most Far ticks.
	Far = 1 << 52
)

// Prepare derives l's Params. l should be valid (bouncer.Limit.Validate);
// an invalid l gives Params that decide without panicking.
func Prepare(l bouncer.Limit) Params {
	p := Params{Limit: l, tick: 1}
	period := max(int64(l.Period), 1)
	interval := max(int64(l.Interval()), 1)
	if horizon(l, period, interval) >= Fine {
		p.tick = Microsecond
	}
	p.far = Far * p.tick
	p.period = ceilTo(period, p.tick)
	p.interval = ceilTo(interval, p.tick) // = ⌈⌈Period/tick⌉/Rate⌉ ticks
	p.span = l.Burst * p.interval
	p.top = l.Rate
	if l.ChargeDenied && (l.Algorithm == bouncer.FixedWindow || l.Algorithm == bouncer.SlidingWindowCounter) {
		p.top++ // a denied check leaves the count at Rate+1
	}
	ticks := p.period / p.tick
	unitTicks := ticks
	if !l.Calendar.IsZero() && l.Calendar.Validate() == nil {
		// A count packs into the shortest window the calendar has.
		p.cal = calendar.NewWindows(l.Calendar)
		unitTicks = int64(l.Calendar.Shortest()) / p.tick
	}
	p.unit = max(unitTicks/max(p.top+1, 1), 1) * p.tick // Rate −1 must not divide by 0
	if l.Algorithm == bouncer.SlidingWindowCounter && p.top >= 0 {
		// (top+1)² ≤ Period without squaring: Rate may be 2⁴⁰.
		if q := ticks / (p.top + 1); q >= p.top+1 {
			p.pair = q / (p.top + 1) * p.tick
		}
	}
	return p
}

// horizon returns how far from now a state of l can reach, in
// nanoseconds (see Fine); it may wrap for an invalid l.
func horizon(l bouncer.Limit, period, interval int64) int64 {
	switch l.Algorithm {
	case bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket:
		return l.Burst * interval
	case bouncer.SlidingWindowCounter:
		return 2 * period
	}
	return period
}

// ceilTo rounds x > 0 up to a multiple of tick.
func ceilTo(x, tick int64) int64 {
	if tick == 1 {
		return x
	}
	return (x + tick - 1) / tick * tick
}

// Tick returns the limit's unit of time in nanoseconds: 1, or
// Microsecond for a limit whose horizon is Fine or more. Every instant
// and duration the limit's checks compute is a whole number of ticks.
func (p *Params) Tick() int64 { return p.tick }

// Period returns the limit's Period in nanoseconds, rounded up to a tick.
func (p *Params) Period() int64 { return p.period }

// Interval returns the time one unit takes to refill or drain, in
// nanoseconds: ⌈Period/Rate⌉ rounded up to a whole tick (in ticks,
// ⌈Period/Rate⌉ of the rounded Period), at least one tick.
func (p *Params) Interval() int64 { return p.interval }

// at returns now rounded down to a tick.
func (p *Params) at(now int64) int64 {
	if p.tick == 1 {
		return now
	}
	return floorDiv(now, p.tick) * p.tick
}

// OneWord reports whether this limit's whole state is State.T: always for
// the algorithms of the package function OneWord, and for a sliding
// window counter whose two counts fit in it.
func (p *Params) OneWord() bool { return OneWord(p.Limit.Algorithm) || p.pair > 0 }

// Packing returns how the window algorithms pack counts into one instant:
// unit is the nanoseconds (whole ticks) that one unit of a fixed window's
// count (or of a two-word sliding window counter's current count) adds to
// the window's start, and pair the same for a one-word sliding window counter's packed
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
	now = p.at(now)
	switch p.Limit.Algorithm {
	case bouncer.SlidingWindowLog:
		return p.slidingWindowLog(s, now, cost)
	case bouncer.SlidingWindowCounter:
		return p.counter(s, now, cost)
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
	now = p.at(now)
	if t-now > p.far {
		// Read as fresh (see Far), and kept unless the check charges (a
		// charged state is never 0).
		if n := p.CheckWordInto(0, now, cost, r); n != 0 {
			return n
		}
		return t
	}
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

// word runs check, one of the one-word algorithms, at now rounded down
// to a tick, on t — or on a fresh state when t is more than Far ticks
// ahead of now, keeping t unless the check charges (a charged state is
// never 0).
func (p *Params) word(check func(*Params, int64, int64, int64, *Result) int64, t, now, cost int64, r *Result) int64 {
	now = p.at(now)
	if t-now <= p.far {
		return check(p, t, now, cost, r)
	}
	if n := check(p, 0, now, cost, r); n != 0 {
		return n
	}
	return t
}

// counter is word for a sliding window counter of two words.
func (p *Params) counter(s State, now, cost int64) (State, Result) {
	now = p.at(now)
	if s.T-now <= p.far {
		return p.slidingWindowCounter(s, now, cost)
	}
	n, r := p.slidingWindowCounter(State{}, now, cost)
	if n.T == 0 {
		n = s
	}
	return n, r
}

// Refund gives n units back at now; see the package function Refund.
func (p *Params) Refund(s State, now, n int64) State {
	if n <= 0 {
		return s
	}
	now = p.at(now)
	if s.T-now > p.far {
		return State{} // read as fresh (see Far): nothing to give back
	}
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
