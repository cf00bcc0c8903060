package memstore

import (
	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
)

// pending is one limit of one key during a check: its state before and
// after, computed before anything is stored.
type pending struct {
	sh     *shard
	t      *table
	h      uint64
	known  bool // the state was stored before this check
	dup    bool // an earlier pending has the same key and limit
	before algo.State
	after  algo.State
	res    algo.Result
	key    string
}

// check decides r with every shard of its keys locked: it computes every
// limit's result first, and stores the new states only if all allow.
func (s *Store) check(r bouncer.Request, hashes []uint64, now int64, pend []pending) bouncer.Decision {
	allowed := true
	for i, k := range r.Keys {
		h := hashes[i]
		sh := &s.shards[s.shardOf(h)]
		for j := range k.Limits {
			p := pending{sh: sh, t: sh.table(&k.Limits[j], true), h: h, key: k.Key}
			p.before, p.known = p.t.load(h)
			// The same key and limit twice in one request: charge the
			// second on top of the first.
			for j := range pend {
				if q := &pend[j]; q.t == p.t && q.h == h {
					p.before, p.dup = q.after, true
				}
			}
			p.after, p.res = p.t.p.Check(p.before, now, r.Cost)
			allowed = allowed && p.res.Allowed
			pend = append(pend, p)
		}
	}
	if allowed {
		for i := range pend {
			p := &pend[i]
			if r.Cost > 0 {
				known := p.known
				if p.dup {
					_, known = p.t.load(p.h) // stored by the earlier one
				}
				p.sh.save(p.t, p.h, p.after, now, known)
			}
		}
	} else {
		// Nothing is charged, so report every limit as it stands: the
		// limits that would have allowed are peeked at with cost 0.
		for i := range pend {
			if p := &pend[i]; p.res.Allowed {
				_, res := p.t.p.Check(p.before, now, 0)
				res.Allowed = true
				p.res = res
			}
		}
	}
	return merge(pend, allowed)
}

// merge reports the binding limit, the one with the least remaining (ties
// to the longer retry, then the longer reset), with the longest retry and
// delay of all.
func merge(pend []pending, allowed bool) bouncer.Decision {
	var d bouncer.Decision
	b := -1
	for i := range pend {
		r := &pend[i].res
		d.RetryAfter = max(d.RetryAfter, r.RetryAfter)
		d.Delay = max(d.Delay, r.Delay)
		if b < 0 {
			b = i
			continue
		}
		c := &pend[b].res
		if r.Remaining < c.Remaining ||
			r.Remaining == c.Remaining && (r.RetryAfter > c.RetryAfter ||
				r.RetryAfter == c.RetryAfter && r.ResetAfter > c.ResetAfter) {
			b = i
		}
	}
	p := &pend[b]
	d.Allowed = allowed
	d.Limit = p.t.limit.Capacity()
	d.Remaining = p.res.Remaining
	d.ResetAfter = p.res.ResetAfter
	d.Key = p.key
	d.LimitName = p.t.limit.Name
	if allowed {
		d.RetryAfter = 0
	}
	return d
}
