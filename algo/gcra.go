package algo

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// GCRA is the generic cell rate algorithm: a token bucket stored as one
// instant, the theoretical arrival time (TAT) — State.T.
//
// With emission interval I = ⌈Period/Rate⌉ and capacity B = Burst:
//
//	tat  = max(T, now)
//	tat' = tat + cost×I
//	allowed ⇔ tat' − now ≤ B×I
//	remaining = ⌊(B×I − (tat' − now)) / I⌋, reset-after = tat' − now
//	retry-after (denied) = tat' − now − B×I
//
// Trade-off: exact to the tick, one int64 per key, bursts up to B,
// then smooth at Rate. It decides exactly as TokenBucket; the two are kept
// as separate code and checked against each other.
func GCRA(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	p := Prepare(l)
	var r Result
	s.T = p.word((*Params).gcra, s.T, now, cost, &r)
	return s, r
}

func (p *Params) gcra(t, now, cost int64, r *Result) int64 {
	interval, capacity := p.interval, p.span
	tat := max(t, now)
	if cost > p.Limit.Burst {
		*r = never(floorDiv(capacity-(tat-now), interval), tat-now)
		return t
	}
	next := tat + cost*interval
	if over := next - now - capacity; over > 0 {
		*r = Result{
			Remaining:  max(floorDiv(capacity-(tat-now), interval), 0),
			ResetAfter: time.Duration(tat - now),
			RetryAfter: time.Duration(over),
		}
		return t
	}
	if cost > 0 {
		t = next
	}
	*r = Result{
		Allowed:    true,
		Remaining:  max(floorDiv(capacity-(next-now), interval), 0),
		ResetAfter: time.Duration(next - now),
	}
	return t
}

// refundTime moves a bucket's instant back by n intervals, never before
// now: a bucket cannot hold more than its capacity. It takes any n ≥ 0: a
// debt may hold many capacities.
func (p *Params) refundTime(t, now, n int64) int64 {
	if t <= now {
		return t
	}
	if n > (t-now)/p.interval {
		return now
	}
	return t - n*p.interval
}

// chargeTime is the three buckets' debt: it moves the instant (GCRA's
// TAT, TokenBucket's full-again instant, LeakyBucket's empty instant)
// cost intervals past max(T, now), beyond the capacity if need be, so
// that checks are denied until time has paid the excess back. It stops at
// MaxDebt ahead of now: a longer debt is cut to it.
func (p *Params) chargeTime(t, now, cost int64) int64 {
	t = max(t, now)
	most := p.MaxDebt()
	if cost > (now+most-t)/p.interval {
		return max(t, now+most) // t may lie further, from a clock ahead of this one
	}
	return t + cost*p.interval
}

// MaxDebt returns, in nanoseconds, the farthest ahead of now a bucket's
// charge moves its instant: Far ticks (2⁵² ns, about 52 days) for a limit
// counted in nanoseconds, 2⁶⁰ ns rounded down to a tick (about 36 years)
// for one counted in microseconds — not Far ticks, 142 years, which would
// pass the end of int64 nanoseconds from the year 2120. A state never lies
// more than Far ticks ahead, which would read as fresh.
func (p *Params) MaxDebt() int64 {
	return min(Far, (1<<60)/p.tick) * p.tick
}
