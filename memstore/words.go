package memstore

// words is an open-addressing hash table from a key's hash to one int64 of
// state, for the one-word algorithms. A check finds its slot with one probe
// sequence and updates it in place, which a Go map (a lookup, then an
// assignment) cannot; a slot is 16 bytes and the table stays between 3/8
// and 3/4 full, so a key costs 21 to 43 bytes.
//
// Linear probing, with deletion by backward shift: no tombstones, so probe
// sequences stay short however many keys come and go. Hash 0 marks an
// empty slot; a key that hashes to 0 is stored as 1.
type words struct {
	slots []wordSlot // a power of two long, or nil
	used  int
}

type wordSlot struct {
	h uint64
	v int64
}

const minWordSlots = 8

func fixHash(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// find returns the index of h's slot, or -1.
func (w *words) find(h uint64) int {
	if w.used == 0 {
		return -1
	}
	mask := len(w.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch w.slots[i].h {
		case h:
			return i
		case 0:
			return -1
		}
	}
}

// insert stores v for h, which must not be in the table.
func (w *words) insert(h uint64, v int64) {
	if (w.used+1)*8 > len(w.slots)*7 {
		w.resize(max(len(w.slots)*2, minWordSlots))
	}
	mask := len(w.slots) - 1
	i := int(h) & mask
	for w.slots[i].h != 0 {
		i = (i + 1) & mask
	}
	w.slots[i] = wordSlot{h: h, v: v}
	w.used++
}

// remove empties slot i, shifting back the entries after it whose probe
// sequence passes through i.
func (w *words) remove(i int) {
	mask := len(w.slots) - 1
	for j := (i + 1) & mask; w.slots[j].h != 0; j = (j + 1) & mask {
		home := int(w.slots[j].h) & mask
		// Move j into the hole at i unless its home lies cyclically in
		// (i, j]: then it is already as close to home as it can be.
		if (j-home)&mask >= (j-i)&mask {
			w.slots[i] = w.slots[j]
			i = j
		}
	}
	w.slots[i] = wordSlot{}
	w.used--
}

// shrink halves the table while it is less than 1/8 full, so that a
// table that held a flood returns its memory. Indices found before it
// are invalid after.
func (w *words) shrink() {
	n := len(w.slots)
	for n > minWordSlots && w.used*8 < n {
		n /= 2
	}
	if w.used == 0 {
		w.slots = nil
		return
	}
	if n != len(w.slots) {
		w.resize(n)
	}
}

func (w *words) resize(n int) {
	old := w.slots
	w.slots = make([]wordSlot, n)
	mask := n - 1
	for _, s := range old {
		if s.h == 0 {
			continue
		}
		i := int(s.h) & mask
		for w.slots[i].h != 0 {
			i = (i + 1) & mask
		}
		w.slots[i] = s
	}
}
