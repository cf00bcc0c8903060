package memstore

import (
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"pgregory.net/rapid"
)

// TestWordsMatchesAMap drives the table and a Go map with the same random
// operations, on few distinct hashes that collide often in a small table,
// and compares them after every step.
func TestWordsMatchesAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var w words
		ref := map[uint64]int64{}
		for step := range rapid.IntRange(1, 300).Draw(t, "steps") {
			h := rapid.Uint64Range(1, 64).Draw(t, "h") << 4 // many collide in a small table
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0, 1:
				_, had := ref[h]
				if inserted := w.set(h, int64(step)); inserted == had {
					t.Fatalf("set(%d) inserted = %v, want %v", h, inserted, !had)
				}
				ref[h] = int64(step)
			case 2:
				if slots, i := w.find(h); i >= 0 {
					if v := slots[i].v.Load(); isLive(v) {
						w.remove(slots, i, v)
					}
				}
				delete(ref, h)
			case 3:
				w.shrink()
			case 4:
				w.rebuild(w.live)
			}
			if w.live != len(ref) {
				t.Fatalf("live = %d, want %d", w.live, len(ref))
			}
			for k, v := range ref {
				slots, i := w.find(k)
				if i < 0 || slots[i].v.Load() != v {
					t.Fatalf("find(%d): got index %d, want value %d", k, i, v)
				}
			}
		}
	})
}

// Lock-free checks racing with inserts, deletes and rebuilds under the
// lock lose nothing: a GCRA state advances by one interval per admitted
// check, so the sum of the states counts every check.
func TestWordsUpdatesSurviveRebuilds(t *testing.T) {
	tb := newTable(bouncer.Limit{Name: "n", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Nanosecond * 1000, Burst: 1 << 30})
	var mu sync.Mutex
	const keys, workers, checks = 16, 4, 2000
	clock := New(Options{Now: func() time.Time { return time.Unix(0, 1) }})
	for k := range uint64(keys) {
		tb.one.set((k+1)<<8, 1) // a live state at the clock's instant
	}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range checks {
				h := uint64((g+i)%keys+1) << 8
				var r bouncer.Decision
				ok := tb.update(h, clock, 1, "", &r)
				if !ok {
					// Not found lock-free: the locked path, as the store does.
					mu.Lock()
					ok = tb.update(h, clock, 1, "", &r)
					mu.Unlock()
				}
				if !ok || !r.Allowed {
					t.Errorf("check of key %d: %+v, %v", h, r, ok)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 300 {
			mu.Lock()
			extra := uint64(1000+i) << 8
			tb.one.set(extra, 5) // grows the table now and then
			if slots, j := tb.one.find(extra); j >= 0 {
				tb.one.remove(slots, j, 5)
			}
			if i%10 == 0 {
				tb.one.rebuild(tb.one.live)
			}
			mu.Unlock()
		}
	})
	wg.Wait()
	var total int64
	for k := range uint64(keys) {
		slots, i := tb.one.find((k + 1) << 8)
		if i < 0 {
			t.Fatalf("key %d missing", k)
		}
		total += slots[i].v.Load() - 1
	}
	if want := int64(workers*checks) * 1000; total != want {
		t.Fatalf("the states advanced by %d ns in all, want %d (one interval per check)", total, want)
	}
}

// A full scan that removes expired entries as it goes removes exactly them.
func TestScanWordsRemovesExactlyTheExpired(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tb := newTable(bouncer.Limit{Name: "s", Algorithm: bouncer.GCRA, Rate: 10, Period: time.Second, Burst: 10})
		expired := map[uint64]bool{}
		for i := range rapid.IntRange(0, 200).Draw(t, "n") {
			h := uint64(rapid.IntRange(1, 1<<20).Draw(t, "h")) << 4
			if _, ok := expired[h]; ok {
				continue
			}
			old := rapid.Bool().Draw(t, "expired")
			v := int64(100 + i) // expires after now = 50
			if old {
				v = int64(i % 50)
			}
			tb.one.set(h, v)
			expired[h] = old
		}
		want := 0
		for _, old := range expired {
			if old {
				want++
			}
		}
		if gone, _, _ := tb.scan(-1, 50, 0); gone != want {
			t.Fatalf("scan removed %d, want %d", gone, want)
		}
		for h, old := range expired {
			_, live := tb.load(h)
			if live == old {
				t.Fatalf("hash %d: live %v after scan, want %v", h, live, !old)
			}
		}
	})
}

// Keys that come and go leave tombstones; rebuilding sizes the table for
// the live keys, so churn does not grow it.
func TestWordsChurnDoesNotGrowTheTable(t *testing.T) {
	var w words
	for i := range uint64(10_000) {
		h := (i + 1) << 4
		w.set(h, 1)
		if slots, j := w.find(h); j >= 0 {
			w.remove(slots, j, 1)
		}
	}
	if w.live != 0 {
		t.Fatalf("live = %d, want 0", w.live)
	}
	if n := len(*w.slots.Load()); n > 2*minWordSlots {
		t.Fatalf("after churn the table has %d slots, want at most %d", n, 2*minWordSlots)
	}
}
