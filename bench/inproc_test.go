package bench

import (
	"fmt"
	"hash/maphash"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
)

// benchKeys are the keys of BenchmarkCheck, made before it runs so that
// the loop formats nothing.
var benchKeys = func() []string {
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	return keys
}()

// BenchmarkCheck measures one check of an existing key with live state:
// every key is warmed before the clock starts (memstore's state ten
// seconds of refill deep), every check must be allowed, and every key must
// still be held afterwards. BenchmarkCheckRandom measures, beside it,
// checks of keys whose state has refilled since their last check.
func BenchmarkCheck(b *testing.B) {
	for _, im := range impls {
		for _, n := range []int{1, 100_000} {
			keys := benchKeys[:n]
			b.Run(fmt.Sprintf("impl=%s/keys=%d/serial", im.name, n), func(b *testing.B) {
				l := warmed(b, im, keys)
				defer l.close()
				b.ReportAllocs()
				i, denied, failed := 0, 0, 0
				for b.Loop() {
					ok, err := l.allow(keys[i])
					if err != nil {
						failed++
					} else if !ok {
						denied++
					}
					if i++; i == n {
						i = 0
					}
				}
				verify(b, l, keys, denied, failed)
			})
			b.Run(fmt.Sprintf("impl=%s/keys=%d/parallel", im.name, n), func(b *testing.B) {
				l := warmed(b, im, keys)
				defer l.close()
				var next atomic.Uint64
				var denied, failed atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(next.Add(7919)) % n
					var d, f int64
					for pb.Next() {
						ok, err := l.allow(keys[i])
						if err != nil {
							f++
						} else if !ok {
							d++
						}
						if i++; i == n {
							i = 0
						}
					}
					denied.Add(d)
					failed.Add(f)
				})
				b.StopTimer()
				verify(b, l, keys, int(denied.Load()), int(failed.Load()))
			})
		}
	}
}

// warmed returns a new im under checkSpec holding state for every key.
func warmed(b *testing.B, im impl, keys []string) limiter {
	b.Helper()
	l := im.new(checkSpec)
	for _, k := range keys {
		if err := l.warm(k); err != nil {
			b.Fatalf("warming %q: %v", k, err)
		}
	}
	// Collect the previous benchmark's garbage before the clock starts.
	runtime.GC()
	return l
}

// verify fails b unless every check was allowed and l still holds exactly
// keys.
func verify(b *testing.B, l limiter, keys []string, denied, failed int) {
	b.Helper()
	if denied > 0 || failed > 0 {
		b.Fatalf("%d checks denied and %d failed, want all allowed", denied, failed)
	}
	if got := l.count(); got != -1 && got != len(keys) {
		b.Fatalf("holds %d keys, want %d", got, len(keys))
	}
	for _, k := range keys {
		if !l.held(k) {
			b.Fatalf("does not hold %q after the run", k)
		}
	}
}

// BenchmarkCheckFloor measures the least work of one check on a table of
// per-key state shared by all goroutines, with BenchmarkCheck's workload at
// 100 000 keys: the same keys, the same serial loop and the same parallel
// loop. A check here hashes the key with hash/maphash, finds its slot by
// linear probing in an open-addressing table of 16-byte slots (a hash and
// one word of value) sized as memstore sizes its tables (a power of two, at
// most 7/8 full: 131 072 slots), and adds 1 to the value with one atomic
// load and compare-and-swap. It reads no clock and decides nothing: an
// exact limiter that keeps its per-key state in such a table does at least
// this much.
//
// In parallel both goroutines walk all the keys, so nearly every check
// finds its slot last written by the other goroutine, on the other vCPU:
// its cache line must move from that vCPU's cache before the
// compare-and-swap can complete. The parallel figure is therefore about
// the cost of one such transfer per check, a floor for the parallel cases
// of BenchmarkCheck. Serially only one core touches the table, and no line
// moves between cores.
//
// Afterwards the benchmark fails if any key was not found or if the values
// do not add up to b.N: a failed compare-and-swap is retried, so every
// check adds exactly 1.
func BenchmarkCheckFloor(b *testing.B) {
	const n = 100_000
	keys := benchKeys[:n]
	b.Run(fmt.Sprintf("keys=%d/serial", n), func(b *testing.B) {
		t := newFloorTable(b, keys)
		runtime.GC()
		b.ReportAllocs()
		i, missed := 0, 0
		for b.Loop() {
			if !t.check(keys[i]) {
				missed++
			}
			if i++; i == n {
				i = 0
			}
		}
		t.verify(b, missed, b.N)
	})
	b.Run(fmt.Sprintf("keys=%d/parallel", n), func(b *testing.B) {
		t := newFloorTable(b, keys)
		runtime.GC()
		var next atomic.Uint64
		var missed atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(7919)) % n
			var m int64
			for pb.Next() {
				if !t.check(keys[i]) {
					m++
				}
				if i++; i == n {
					i = 0
				}
			}
			missed.Add(m)
		})
		b.StopTimer()
		t.verify(b, int(missed.Load()), b.N)
	})
}

// floorTable is BenchmarkCheckFloor's table: an open-addressing table from
// a key's hash to a count, laid out like memstore's tables.
type floorTable struct {
	seed  maphash.Seed
	slots []floorSlot // a power of two long
}

type floorSlot struct {
	h atomic.Uint64 // 0: empty
	v atomic.Int64
}

// newFloorTable returns a table holding every key with value 0, in the
// fewest slots, a power of two, that keep it at most 7/8 full.
func newFloorTable(b *testing.B, keys []string) *floorTable {
	b.Helper()
	size := 8
	for size*7 < len(keys)*8 {
		size *= 2
	}
	t := &floorTable{seed: maphash.MakeSeed(), slots: make([]floorSlot, size)}
	mask := size - 1
	for _, k := range keys {
		h := t.hash(k)
		i := int(h) & mask
		for ; t.slots[i].h.Load() != 0; i = (i + 1) & mask {
			if t.slots[i].h.Load() == h {
				b.Fatalf("%q has the same 64-bit hash as another key", k)
			}
		}
		t.slots[i].h.Store(h)
	}
	return t
}

// hash returns key's hash, never 0, which marks an empty slot.
func (t *floorTable) hash(key string) uint64 {
	h := maphash.String(t.seed, key)
	if h == 0 {
		return 1
	}
	return h
}

// check adds 1 to key's value and reports whether it found key.
func (t *floorTable) check(key string) bool {
	h := t.hash(key)
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch t.slots[i].h.Load() {
		case h:
			v := &t.slots[i].v
			for {
				old := v.Load()
				if v.CompareAndSwap(old, old+1) {
					return true
				}
			}
		case 0:
			return false
		}
	}
}

// verify fails b if any check missed its key or if the values do not add
// up to the number of checks.
func (t *floorTable) verify(b *testing.B, missed, checks int) {
	b.Helper()
	if missed > 0 {
		b.Fatalf("%d checks did not find their key", missed)
	}
	var sum int64
	for i := range t.slots {
		sum += t.slots[i].v.Load()
	}
	if sum != int64(checks) {
		b.Fatalf("values add up to %d, want %d, the number of checks", sum, checks)
	}
}
