package algo

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// LeakyBucket is a bucket Burst units deep that drains one unit per
// interval I = ⌈Period/Rate⌉. State.T is the instant the bucket is empty;
// the level, in nanoseconds of draining, is max(0, T − now):
//
//	allowed ⇔ level + cost×I ≤ B×I
//	T' = now + level + cost×I
//	remaining = ⌊(B×I − level')/I⌋, reset-after = level'
//	retry-after (denied) = level + cost×I − B×I
//
// Police mode (Shape unset) denies what overflows; as a meter it decides
// exactly as TokenBucket. Shape mode admits the same checks but sets
// Delay = level, the time until the units ahead have drained, so requests
// that wait out their Delay leave at a steady Rate. Burst counts the unit
// being served: Burst 1 queues nothing.
//
// Trade-off: one int64 per key; smooths bursts into a steady flow at the
// price of latency (shape) or of denying any burst beyond Burst (police).
func LeakyBucket(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	p := Prepare(l)
	var r Result
	s.T = p.word((*Params).leakyBucket, s.T, now, cost, &r)
	return s, r
}

func (p *Params) leakyBucket(t, now, cost int64, r *Result) int64 {
	interval, depth := p.interval, p.span
	level := max(0, t-now)
	if cost > p.Limit.Burst {
		*r = never(floorDiv(depth-level, interval), level)
		return t
	}
	if over := level + cost*interval - depth; over > 0 {
		*r = Result{
			Remaining:  max(floorDiv(depth-level, interval), 0),
			ResetAfter: time.Duration(level),
			RetryAfter: time.Duration(over),
		}
		return t
	}
	*r = Result{Allowed: true}
	if p.Limit.Shape && cost > 0 {
		r.Delay = time.Duration(level)
	}
	level += cost * interval
	if cost > 0 {
		t = now + level
	}
	r.Remaining = (depth - level) / interval
	r.ResetAfter = time.Duration(level)
	return t
}
