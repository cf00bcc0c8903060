package algo

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// SlidingWindowLog remembers each admitted check, as an Entry of its
// instant and cost, for one Period. The window is (now − P, now]:
//
//	used = Σ N of entries with At > now − P
//	allowed ⇔ used + cost ≤ Rate
//	remaining = Rate − used', reset-after = newest.At + P − now
//	retry-after (denied) = the instant enough of the oldest entries have
//	  left the window, minus now
//
// (reset-after and retry-after at most Far ticks: see Far.)
//
// Trade-off: exact — never more than Rate in any window of length Period —
// at the price of memory that grows with the admitted checks in a Period
// (at most Rate entries per key): use it for small limits.
func SlidingWindowLog(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	p := Prepare(l)
	return p.slidingWindowLog(s, p.at(now), cost)
}

func (p *Params) slidingWindowLog(s State, now, cost int64) (State, Result) {
	l, period := &p.Limit, p.period
	s.Log = dropThrough(s.Log, now-period)
	used := sum(s.Log)
	reset := int64(0)
	if len(s.Log) > 0 {
		reset = min(s.Log[len(s.Log)-1].At+period-now, p.far)
	}
	if cost > l.Rate {
		return s, never(l.Rate-used, reset)
	}
	if over := used + cost - l.Rate; over > 0 {
		return s, Result{
			Remaining:  max(l.Rate-used, 0),
			ResetAfter: time.Duration(reset),
			RetryAfter: time.Duration(min(max(freedAt(s.Log, over)+period-now, 0), p.far)),
		}
	}
	if cost > 0 {
		s.Log = insert(s.Log, Entry{At: now, N: cost})
		reset = max(reset, period)
	}
	return s, Result{Allowed: true, Remaining: l.Rate - used - cost, ResetAfter: time.Duration(reset)}
}

func (p *Params) refundSlidingWindowLog(s State, now, n int64) State {
	s.Log = dropThrough(s.Log, now-p.period)
	for n > 0 && len(s.Log) > 0 {
		last := &s.Log[len(s.Log)-1]
		take := min(n, last.N)
		last.N -= take
		n -= take
		if last.N == 0 {
			s.Log = s.Log[:len(s.Log)-1]
		}
	}
	return s
}

// dropThrough returns log without its leading entries at or before t.
func dropThrough(log []Entry, t int64) []Entry {
	i := 0
	for i < len(log) && log[i].At <= t {
		i++
	}
	if i == len(log) {
		return nil
	}
	return log[i:]
}

func sum(log []Entry) int64 {
	var n int64
	for _, e := range log {
		n += e.N
	}
	return n
}

// freedAt returns the At of the entry whose leaving, with all older ones,
// frees at least n units.
func freedAt(log []Entry, n int64) int64 {
	for _, e := range log {
		n -= e.N
		if n <= 0 {
			return e.At
		}
	}
	if len(log) == 0 {
		return 0
	}
	return log[len(log)-1].At
}

// insert adds e keeping log ordered by At. It appends, so the entries that
// the caller's slice sees are never written. An entry older than the
// newest (a clock that stepped back) is stored at the newest instant.
func insert(log []Entry, e Entry) []Entry {
	if n := len(log); n > 0 && log[n-1].At > e.At {
		e.At = log[n-1].At
	}
	return append(log, e)
}

// chargeSlidingWindowLog is the log's debt: it logs cost units at now
// whatever the window holds, so that checks are denied until enough of
// them have left it. One entry per charge, and at most Rate+1 entries: a
// charge that finds more merges into the newest entry, moved to now, whose
// units then leave the window later, never earlier. The units in the
// window stop at Far.
func (p *Params) chargeSlidingWindowLog(s State, now, cost int64) State {
	s.Log = dropThrough(s.Log, now-p.period)
	cost = min(cost, max(Far-sum(s.Log), 0))
	if cost == 0 {
		return s
	}
	if n := len(s.Log); int64(n) > p.Limit.Rate {
		last := &s.Log[n-1]
		last.At = max(last.At, now)
		last.N += cost
		return s
	}
	s.Log = insert(s.Log, Entry{At: now, N: cost})
	return s
}
