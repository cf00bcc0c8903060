package memstore

import (
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
)

// table holds one limit's states, by key hash. Exactly one of its maps is
// used, by the shape of the limit's state.
type table struct {
	limit    bouncer.Limit
	capacity int64 // limit.Capacity()
	interval int64 // limit.Interval() in ns: chooses the store's clock
	p        algo.Params
	one      *words                  // algo.OneWord algorithms: State.T
	two      map[uint64][2]int64     // sliding window counter: State.T, State.N
	log      map[uint64][]algo.Entry // log algorithms: State.Log
}

func newTable(l bouncer.Limit) *table {
	t := &table{limit: l, capacity: l.Capacity(), interval: int64(l.Interval()), p: algo.Prepare(l)}
	switch {
	case t.p.OneWord():
		t.one = new(words)
	case l.Algorithm == bouncer.SlidingWindowCounter:
		t.two = make(map[uint64][2]int64)
	default:
		t.log = make(map[uint64][]algo.Entry)
	}
	return t
}

func (t *table) len() int {
	if t.one != nil {
		return t.one.live
	}
	return len(t.two) + len(t.log)
}

func (t *table) load(h uint64) (algo.State, bool) {
	switch {
	case t.one != nil:
		if slots, i := t.one.find(h); i >= 0 {
			if v := slots[i].v.Load(); isLive(v) {
				return algo.State{T: v}, true
			}
		}
		return algo.State{}, false
	case t.two != nil:
		v, ok := t.two[h]
		return algo.State{T: v[0], N: v[1]}, ok
	}
	v, ok := t.log[h]
	return algo.State{Log: v}, ok
}

func (t *table) put(h uint64, s algo.State) {
	switch {
	case t.one != nil:
		t.one.set(h, s.T)
	case t.two != nil:
		t.two[h] = [2]int64{s.T, s.N}
	default:
		t.log[h] = s.Log
	}
}

func (t *table) del(h uint64) {
	switch {
	case t.one != nil:
		if slots, i := t.one.find(h); i >= 0 {
			if v := slots[i].v.Load(); isLive(v) {
				t.one.remove(slots, i, v)
			}
		}
	case t.two != nil:
		delete(t.two, h)
	default:
		delete(t.log, h)
	}
}

// forget deletes h's state, live or not, and reports whether it held
// any. Lock-free checks may change a word meanwhile, never delete it.
func (t *table) forget(h uint64) bool {
	switch {
	case t.one != nil:
		slots, i := t.one.find(h)
		if i < 0 {
			return false
		}
		for {
			v := slots[i].v.Load()
			if !isLive(v) {
				return false
			}
			if t.one.remove(slots, i, v) {
				return true
			}
		}
	case t.two != nil:
		_, ok := t.two[h]
		delete(t.two, h)
		return ok
	default:
		_, ok := t.log[h]
		delete(t.log, h)
		return ok
	}
}

// scanWords is scan over a words table, under the shard's lock. A sample
// starts at the slot that from picks, so that successive samples look at
// different parts of the table.
func (t *table) scanWords(n int, now int64, from uint64, gone *int, oldest *uint64, found *bool, at *int64) {
	p := t.one.slots.Load()
	if p == nil {
		return
	}
	slots := *p
	mask := len(slots) - 1
	i := 0
	if n >= 0 {
		i = int(from*0x9E3779B97F4A7C15>>32) & mask
	}
	for range slots {
		if n == 0 {
			return
		}
		s := &slots[i]
		i = (i + 1) & mask
		h, v := s.h.Load(), s.v.Load()
		if h == 0 || !isLive(v) {
			continue
		}
		n--
		e := t.p.Expiry(algo.State{T: v})
		switch {
		case e <= now:
			if t.one.remove(slots, (i-1)&mask, v) {
				*gone++
			}
		case !*found || e < *at:
			*oldest, *at, *found = h, e, true
		}
	}
}

// scan inspects up to n of the table's entries from a random start (all
// of them when n < 0). It deletes those back to fresh at now and returns
// how many it deleted, and, among the live ones, the hash of the one
// closest to fresh. Loops rather than a callback keep it allocation-free.
func (t *table) scan(n int, now int64, from uint64) (gone int, oldest uint64, found bool) {
	var at int64
	visit := func(h uint64, s algo.State) bool {
		if n == 0 {
			return false
		}
		n--
		e := t.p.Expiry(s)
		switch {
		case e <= now:
			t.del(h)
			gone++
		case !found || e < at:
			oldest, at, found = h, e, true
		}
		return true
	}
	switch {
	case t.one != nil:
		t.scanWords(n, now, from, &gone, &oldest, &found, &at)
		return gone, oldest, found
	case t.two != nil:
		for h, v := range t.two {
			if !visit(h, algo.State{T: v[0], N: v[1]}) {
				break
			}
		}
	default:
		for h, v := range t.log {
			if !visit(h, algo.State{Log: v}) {
				break
			}
		}
	}
	return gone, oldest, found
}

// samplesPerInsert is how many entries a new key's insertion inspects for
// idle state, so that idle state is reclaimed as fast as new state arrives
// while a quarter or more of a table is idle.
const samplesPerInsert = 4

// keepRefilled is how long a table keeps a state after it is back to fresh
// (a bucket refilled, a window over), while its shard holds less than half
// its share of MaxKeys: a key checked again meanwhile, such as a client
// below its limit, finds its state in place, and a one-word check of it
// stays lock-free. Forgetting such state as soon as it is fresh made the
// insertions of the clients that come back forget the state of others that
// would come back too, so that nearly every check of a client below its
// limit took the locked path of a new key (docs/memstore.md).
const keepRefilled = int64(time.Minute)

// save stores s as h's state in t, or forgets h when s is back to fresh.
// known says whether h already has state in t. An insertion forgets the
// sampled states that have been fresh for keepRefilled or longer, or, in a
// shard holding half its share of MaxKeys or more, those back to fresh.
func (sh *shard) save(t *table, h uint64, s algo.State, now int64, known bool) {
	if t.p.Expiry(s) <= now {
		if known {
			t.del(h)
			sh.count--
		}
		return
	}
	if !known {
		idle := now - keepRefilled
		if 2*sh.count >= sh.max {
			idle = now
		}
		sh.expire(t, idle, samplesPerInsert, h)
		if sh.count >= sh.max {
			sh.evict(t, now, h)
		}
		sh.count++
	}
	t.put(h, s)
}

// expire forgets up to n sampled states of t that are back to fresh by now
// (all of them when n < 0) and returns how many.
func (sh *shard) expire(t *table, now int64, n int, from uint64) int {
	gone, _, _ := t.scan(n, now, from)
	sh.count -= gone
	sh.expired += uint64(gone)
	return gone
}

// evictSamples is how many states a full shard inspects to choose which
// one to evict.
const evictSamples = 8

// evict makes room for one state in a full shard: expired state if the
// sampled entries of its tables have some, otherwise the sampled live
// state closest to fresh, preferring t's own.
func (sh *shard) evict(t *table, now int64, from uint64) {
	victim := t
	if set := sh.tables.Load(); set != nil {
		for _, o := range set.list {
			if victim.len() == 0 {
				victim = o
			}
		}
	}
	gone, oldest, found := victim.scan(evictSamples, now, from)
	sh.count -= gone
	sh.expired += uint64(gone)
	if gone > 0 || !found {
		return
	}
	victim.del(oldest)
	sh.count--
	sh.forced++
}
