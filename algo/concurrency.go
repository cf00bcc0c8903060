package algo

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// Concurrency allows at most Rate units in flight. A check of cost n takes
// a lease on n units that expires at now + Period; Refund releases leases,
// oldest first. A holder that never releases (a crashed process) holds its
// units until the lease expires.
//
//	active = Σ N of leases with At > now
//	allowed ⇔ active + cost ≤ Rate
//	remaining = Rate − active', reset-after = the last lease's expiry − now
//	retry-after (denied) = until enough leases expire, if none is released
//
// (reset-after and retry-after at most Far ticks: see Far.)
//
// Releasing the oldest lease rather than the releasing request's own keeps
// the in-flight count exact; it can only make a lost lease live longer,
// never shorter. State.Log holds the leases ordered by expiry.
//
// Trade-off: one Entry per admitted check still in flight, at most Rate per
// key.
func Concurrency(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	p := Prepare(l)
	return p.concurrency(s, p.at(now), cost)
}

func (p *Params) concurrency(s State, now, cost int64) (State, Result) {
	l := &p.Limit
	s.Log = dropThrough(s.Log, now)
	active := sum(s.Log)
	reset := int64(0)
	if len(s.Log) > 0 {
		reset = min(s.Log[len(s.Log)-1].At-now, p.far)
	}
	if cost > l.Rate {
		return s, never(l.Rate-active, reset)
	}
	if over := active + cost - l.Rate; over > 0 {
		return s, Result{
			Remaining:  max(l.Rate-active, 0),
			ResetAfter: time.Duration(reset),
			RetryAfter: time.Duration(min(max(freedAt(s.Log, over)-now, 0), p.far)),
		}
	}
	if cost > 0 {
		s.Log = insert(s.Log, Entry{At: now + p.period, N: cost})
		reset = min(s.Log[len(s.Log)-1].At-now, p.far)
	}
	return s, Result{Allowed: true, Remaining: l.Rate - active - cost, ResetAfter: time.Duration(reset)}
}

func (p *Params) refundConcurrency(s State, now, n int64) State {
	s.Log = dropThrough(s.Log, now)
	for n > 0 && len(s.Log) > 0 {
		first := &s.Log[0]
		take := min(n, first.N)
		first.N -= take
		n -= take
		if first.N == 0 {
			s.Log = s.Log[1:]
		}
	}
	if len(s.Log) == 0 {
		s.Log = nil
	}
	return s
}
