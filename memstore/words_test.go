package memstore

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"

	"pgregory.net/rapid"
)

// TestWordsMatchesAMap drives the open-addressing table and a Go map with
// the same random operations, on few distinct hashes that collide often in
// a small table, and compares them after every step.
func TestWordsMatchesAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var w words
		ref := map[uint64]int64{}
		for step := range rapid.IntRange(1, 300).Draw(t, "steps") {
			h := rapid.Uint64Range(1, 64).Draw(t, "h") << 4 // many collide in a small table
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				v := int64(step)
				if i := w.find(h); i >= 0 {
					w.slots[i].v = v
				} else {
					w.insert(h, v)
				}
				ref[h] = v
			case 2:
				if i := w.find(h); i >= 0 {
					w.remove(i)
				}
				delete(ref, h)
			case 3:
				w.shrink()
			}
			if w.used != len(ref) {
				t.Fatalf("used = %d, want %d", w.used, len(ref))
			}
			for k, v := range ref {
				i := w.find(k)
				if i < 0 || w.slots[i].v != v {
					t.Fatalf("find(%d): got index %d, want value %d", k, i, v)
				}
			}
		}
	})
}

// A full scan that removes entries as it goes must visit every entry.
func TestScanWordsVisitsEveryEntry(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tb := newTable(bouncer.Limit{Name: "s", Algorithm: bouncer.GCRA, Rate: 10, Period: time.Second, Burst: 10})
		n := rapid.IntRange(0, 200).Draw(t, "n")
		expired := map[uint64]bool{}
		for i := range n {
			h := uint64(rapid.IntRange(1, 1<<20).Draw(t, "h")) << 4
			if tb.one.find(h) >= 0 {
				continue
			}
			old := rapid.Bool().Draw(t, "expired")
			v := int64(100 + i) // expiry after now = 50
			if old {
				v = int64(i % 50)
			}
			tb.one.insert(h, v)
			expired[h] = old
		}
		want := 0
		for _, old := range expired {
			if old {
				want++
			}
		}
		gone, _, _ := tb.scan(-1, 50, 0)
		if gone != want {
			t.Fatalf("scan removed %d, want %d", gone, want)
		}
		for h, old := range expired {
			if found := tb.one.find(h) >= 0; found == old {
				t.Fatalf("hash %d: present %v after scan, want %v", h, found, !old)
			}
		}
	})
}
