package algo

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// TokenBucket holds up to Burst tokens and refills one token per interval
// I = ⌈Period/Rate⌉, continuously. State.T is the instant the bucket is
// full again, from which the tokens follow; counting tokens in nanoseconds
// of refill keeps fractions exact:
//
//	credit = B×I − max(0, T − now)       (tokens × I)
//	allowed ⇔ cost×I ≤ credit
//	credit' = credit − cost×I, T' = now + B×I − credit'
//	remaining = ⌊credit'/I⌋, reset-after = B×I − credit'
//	retry-after (denied) = cost×I − credit
//
// Trade-off: one int64 per key; allows bursts of up to Burst, then Rate per
// Period on average; exact.
func TokenBucket(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	p := Prepare(l)
	var r Result
	s.T = p.word((*Params).tokenBucket, s.T, now, cost, &r)
	return s, r
}

func (p *Params) tokenBucket(t, now, cost int64, r *Result) int64 {
	interval, full := p.interval, p.span
	credit := full - max(0, t-now)
	if cost > p.Limit.Burst {
		*r = never(floorDiv(credit, interval), full-credit)
		return t
	}
	need := cost * interval
	if need > credit {
		*r = Result{
			Remaining:  max(floorDiv(credit, interval), 0),
			ResetAfter: time.Duration(full - credit),
			RetryAfter: time.Duration(need - credit),
		}
		return t
	}
	credit -= need
	if cost > 0 {
		t = now + full - credit
	}
	*r = Result{
		Allowed:    true,
		Remaining:  credit / interval,
		ResetAfter: time.Duration(full - credit),
	}
	return t
}
