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
	known  bool  // the state was stored before this check
	locked int   // for a one-word table: the slot taken with words.lock, or -1
	first  int   // the index of the first pending with the same key and limit
	now    int64 // the time of the check for t's clock
	before algo.State
	after  algo.State
	res    algo.Result
	key    string
}

// check decides r with every shard of its keys locked. It takes every
// limit's state first (for one-word tables, locking the slot against
// lock-free checks), then reads the clocks (each table's own, see
// Store.clock), computes every result, and stores the new states only if
// all allow — but for the limits with ChargeDenied, whose new states it
// stores either way.
func (s *Store) check(r bouncer.Request, hashes []uint64, pend []pending) bouncer.Decision {
	pend = s.take(r, hashes, pend)
	s.readClocks(pend)
	allowed := compute(pend, r.Cost)
	// A denied check charges the limits with ChargeDenied all the same.
	settle(pend, allowed && r.Cost > 0, !allowed && r.Cost > 0)
	if !allowed {
		peekAllowed(pend)
	}
	return merge(pend, allowed)
}

// take appends to pend every limit of r's keys with its state, locking
// the slot of a one-word table's.
func (s *Store) take(r bouncer.Request, hashes []uint64, pend []pending) []pending {
	for i, k := range r.Keys {
		h := hashes[i]
		sh := &s.shards[s.shardOf(h)]
		for j := range k.Limits {
			p := pending{sh: sh, t: sh.table(&k.Limits[j], true), h: h, key: k.Key, locked: -1, first: len(pend)}
			for q := range pend {
				if pend[q].t == p.t && pend[q].h == h {
					p.first = q // the same key and limit twice in one request
					break
				}
			}
			switch {
			case p.first != len(pend):
			case p.t.one != nil:
				var v int64
				p.locked, v, p.known = p.t.one.lock(h)
				p.before = algo.State{T: v}
			default:
				p.before, p.known = p.t.load(h)
			}
			pend = append(pend, p)
		}
	}
	return pend
}

// readClocks sets each pending's now: the coarse clock for a table whose
// interval allows it, the exact one otherwise, each read once.
func (s *Store) readClocks(pend []pending) {
	var exact, coarse int64
	for i := range pend {
		p := &pend[i]
		if p.t.interval >= s.res {
			if coarse == 0 {
				coarse = s.ticking.load()
			}
			p.now = coarse
		} else {
			if exact == 0 {
				exact = s.now()
			}
			p.now = exact
		}
	}
}

// compute decides every pending at cost, and reports whether all allow.
func compute(pend []pending, cost int64) bool {
	allowed := true
	for i := range pend {
		p := &pend[i]
		if p.first != i {
			// Charge the second on top of the first.
			for q := i - 1; q >= 0; q-- {
				if pend[q].first == p.first {
					p.before = pend[q].after
					break
				}
			}
		}
		p.after, p.res = p.t.p.Check(p.before, p.now, cost)
		allowed = allowed && p.res.Allowed
	}
	return allowed
}

// settle releases the locked slots, with the new state if commit (or
// charge, for a ChargeDenied limit), and saves the other new states.
func settle(pend []pending, commit, charge bool) {
	// Release the locked slots first (inserting may rebuild a table, which
	// must not meet a locked slot), then store what is new.
	for i := range pend {
		if p := &pend[i]; p.locked >= 0 {
			v := p.before.T
			if commit || charge && p.t.limit.ChargeDenied {
				v = pend[lastOf(pend, i)].after.T
			}
			p.t.one.unlock(p.locked, v)
		}
	}
	if commit || charge {
		for i := range pend {
			if p := &pend[i]; p.first == i && p.locked < 0 && (commit || p.t.limit.ChargeDenied) {
				p.sh.save(p.t, p.h, pend[lastOf(pend, i)].after, p.now, p.known)
			}
		}
	}
}

// peekAllowed reports, for a denied check, every limit that would have
// allowed as it stood before the check, peeked at with cost 0, even one
// that ChargeDenied charged: only a limit that denied binds a denied
// decision.
func peekAllowed(pend []pending) {
	for i := range pend {
		if p := &pend[i]; p.res.Allowed {
			_, res := p.t.p.Check(pend[p.first].before, p.now, 0)
			res.Allowed = true
			p.res = res
		}
	}
}

// lastOf returns the index of the last pending with the same key and limit
// as pend[i], whose new state is the one to store.
func lastOf(pend []pending, i int) int {
	last := i
	for j := i + 1; j < len(pend); j++ {
		if pend[j].first == pend[i].first {
			last = j
		}
	}
	return last
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
	d.Capacity = p.t.limit.Capacity()
	d.Remaining = p.res.Remaining
	d.ResetAfter = p.res.ResetAfter
	d.Key = p.key
	d.LimitName = p.t.limit.Name
	if allowed {
		d.RetryAfter = 0
	}
	return d
}
