package memstore

import (
	"math"
	"runtime"
	"sync/atomic"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
)

// words is an open-addressing hash table from a key's hash to one int64 of
// state, for the one-word algorithms: 16 bytes a slot, at most 7/8 full.
//
// Checks of one key and one limit run without the shard's lock: they find
// the slot, read its value, read the clock, and compare-and-swap the new
// value in, retrying if another check got there first. Everything that
// changes the table's shape — inserting, deleting, rebuilding — holds the
// shard's lock, and marks values so that lock-free checks notice:
//
//   - a slot's hash, once set, never changes until a rebuild copies the
//     table, so a check that found its hash has found its key for good;
//   - deleting a key stores slotDeleted in its value (a tombstone), and a
//     rebuild leaves tombstones behind;
//   - a rebuild stores slotMoved in every value it copies, then publishes
//     the new slots: a check that meets slotMoved starts again on them;
//   - a check of several limits stores slotLocked in the values it decides
//     and the final values once it has decided all of them, so that its
//     all-or-nothing step is atomic; lock-free checks wait for it.
//
// A value that a lock-free check meets deleted (or a key it does not find)
// sends it to the locked path, which inserts.
type words struct {
	slots  atomic.Pointer[[]wordSlot] // a power of two long
	live   int                        // keys with state; under the lock
	filled int                        // slots with a hash, live or deleted; under the lock
}

type wordSlot struct {
	h atomic.Uint64 // 0: empty
	v atomic.Int64
}

// Values no state takes: states are instants since the Unix epoch.
const (
	slotMoved   = math.MinInt64
	slotDeleted = math.MinInt64 + 1
	slotLocked  = math.MinInt64 + 2
)

func isLive(v int64) bool { return v > slotLocked }

const minWordSlots = 8

// fixHash keeps 0 free to mark an empty slot.
func fixHash(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// find returns the current slots and the index of h's slot in them, or -1.
// It takes no lock.
func (w *words) find(h uint64) ([]wordSlot, int) {
	p := w.slots.Load()
	if p == nil {
		return nil, -1
	}
	slots := *p
	mask := len(slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch slots[i].h.Load() {
		case h:
			return slots, i
		case 0:
			return slots, -1
		}
	}
}

// update runs one check of cost on key, hashed to h, on the key's state in
// t without the shard's lock, and fills in d with the check's decision. It
// reports false when the key has no live state, for the locked path to
// handle.
func (t *table) update(h uint64, c *Store, cost int64, key string, d *bouncer.Decision) bool {
	return t.apply(h, c, func(v, now int64) int64 {
		var r algo.Result
		// A denied check, or one of cost 0, returns v itself unless the
		// limit charges denied checks.
		next := t.p.CheckWordInto(v, now, cost, &r)
		// Filling in d before the compare-and-swap, which waits for every
		// store before it, lets the caller copy d without stalling on
		// stores in flight.
		decide(d, key, t, &r)
		return next
	})
}

// refund gives cost back to h's state in t, as update does a check.
func (t *table) refund(h uint64, c *Store, cost int64) bool {
	return t.apply(h, c, func(v, now int64) int64 { return t.p.Refund(algo.State{T: v}, now, cost).T })
}

// charge takes cost from h's state in t, past the limit if need be, as
// update does a check.
func (t *table) charge(h uint64, c *Store, cost int64) bool {
	return t.apply(h, c, func(v, now int64) int64 { return t.p.ChargeWord(v, now, cost) })
}

// apply replaces h's live value v in t by f(v, now), without the shard's
// lock, retrying if another check got there first. It reports false when
// the key has no live state.
func (t *table) apply(h uint64, c *Store, f func(v, now int64) int64) bool {
	for {
		slots, i := t.one.find(h)
		if i < 0 {
			return false
		}
		slot := &slots[i]
		for {
			v := slot.v.Load()
			switch v {
			case slotLocked:
				runtime.Gosched()
				continue
			case slotDeleted:
				return false
			case slotMoved:
			default:
				// Reading the clock after the value keeps one key's
				// times in order: whoever stored v read the clock first.
				next := f(v, c.clock(t))
				if next == v || slot.v.CompareAndSwap(v, next) {
					return true
				}
				continue
			}
			break // moved: find the key in the new slots
		}
	}
}

// The methods below hold the shard's lock.

// lock takes h's live value for a check of several limits and returns its
// index and value; ok is false if h has no live state.
func (w *words) lock(h uint64) (i int, v int64, ok bool) {
	slots, i := w.find(h)
	if i < 0 {
		return -1, 0, false
	}
	for {
		v = slots[i].v.Load()
		if !isLive(v) {
			return -1, 0, false // deleted; nothing else happens under the lock
		}
		if slots[i].v.CompareAndSwap(v, slotLocked) {
			return i, v, true
		}
	}
}

// unlock stores v in slot i, taken by lock.
func (w *words) unlock(i int, v int64) { (*w.slots.Load())[i].v.Store(v) }

// set stores v for h, inserting h if it has no live state, and reports
// whether it inserted.
func (w *words) set(h uint64, v int64) (inserted bool) {
	slots, i := w.find(h)
	if i >= 0 {
		for {
			old := slots[i].v.Load()
			if !isLive(old) {
				slots[i].v.Store(v) // revive a tombstone: its hash is h's
				w.live++
				return true
			}
			if slots[i].v.CompareAndSwap(old, v) {
				return false
			}
		}
	}
	if slots == nil || (w.filled+1)*8 > len(slots)*7 {
		// Sized for the live keys: full of them, the table doubles; full
		// of tombstones, it is rebuilt at the same size or smaller.
		slots = w.rebuild(w.live + 1)
	}
	mask := len(slots) - 1
	i = int(h) & mask
	for slots[i].h.Load() != 0 {
		i = (i + 1) & mask
	}
	slots[i].v.Store(v) // the value first: a lock-free check that finds the hash reads it
	slots[i].h.Store(h)
	w.live++
	w.filled++
	return true
}

// remove deletes slot i's state if it still is v, and reports whether it
// did.
func (w *words) remove(slots []wordSlot, i int, v int64) bool {
	if !slots[i].v.CompareAndSwap(v, slotDeleted) {
		return false
	}
	w.live--
	return true
}

// rebuild copies the live states into new slots sized for want keys —
// the fewest, a power of two, that keep them at most 7/8 full — publishes
// them and returns them.
func (w *words) rebuild(want int) []wordSlot {
	n := minWordSlots
	for n*7 < want*8 {
		n *= 2
	}
	fresh := make([]wordSlot, n)
	mask := n - 1
	live := 0
	if p := w.slots.Load(); p != nil {
		for i := range *p {
			s := &(*p)[i]
			h := s.h.Load()
			if h == 0 {
				continue
			}
			v := s.v.Swap(slotMoved)
			if !isLive(v) {
				continue
			}
			j := int(h) & mask
			for fresh[j].h.Load() != 0 {
				j = (j + 1) & mask
			}
			fresh[j].v.Store(v)
			fresh[j].h.Store(h)
			live++
		}
	}
	w.live, w.filled = live, live
	w.slots.Store(&fresh)
	return fresh
}

// shrink rebuilds the table when tombstones or emptiness waste most of it.
func (w *words) shrink() {
	p := w.slots.Load()
	if p == nil {
		return
	}
	if w.live == 0 {
		w.rebuild(0)
		w.slots.Store(nil)
		return
	}
	if len(*p) > minWordSlots && (w.live*8 < len(*p) || w.filled > 2*w.live) {
		w.rebuild(w.live)
	}
}
