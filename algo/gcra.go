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
// Far ticks ahead of now, past which a state reads as fresh: a debt longer
// than that is cut to it.
func (p *Params) chargeTime(t, now, cost int64) int64 {
	t = max(t, now)
	if cost > (now+p.far-t)/p.interval {
		return now + p.far
	}
	return t + cost*p.interval
}
