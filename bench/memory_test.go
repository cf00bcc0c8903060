package bench

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
)

// bytesKeys is how many distinct keys BenchmarkBytesPerKey inserts.
const bytesKeys = 1_000_000

// BenchmarkBytesPerKey measures the heap an implementation holds per key:
// live heap after a million keys were checked once each, less live heap
// before the store was made, over a million. Each key is a string made
// afresh for its check, as a server makes it from a request, and dropped
// after it: an implementation that keeps the key is charged for it, one
// that does not is not. The timed part is the insertion alone, reported
// per key as ns/key; allocs/op counts the insertion's allocations,
// including the million keys themselves.
func BenchmarkBytesPerKey(b *testing.B) {
	for _, im := range impls {
		b.Run("impl="+im.name+"/keys="+strconv.Itoa(bytesKeys), func(b *testing.B) {
			var perKey float64
			runs := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				before := liveHeap()
				l := im.new(holdSpec)
				b.StartTimer()
				denied := insert(l, bytesKeys)
				b.StopTimer()
				after := liveHeap()
				if denied > 0 {
					b.Fatalf("%d of %d first checks denied or failed", denied, bytesKeys)
				}
				if got := l.count(); got != -1 && got != bytesKeys {
					b.Fatalf("holds %d keys, want %d", got, bytesKeys)
				}
				if missing := missing(l, bytesKeys); missing > 0 {
					b.Fatalf("does not hold %d of %d keys", missing, bytesKeys)
				}
				l.close()
				// Return the freed heap to the system now, rather than
				// in the background on the clock of whatever runs next.
				debug.FreeOSMemory()
				perKey += float64(after-before) / bytesKeys
				runs++
				b.StartTimer()
			}
			b.ReportMetric(perKey/float64(runs), "B/key")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(runs)/bytesKeys, "ns/key")
		})
	}
}

// insert checks keys user:0 to user:n-1 once each and returns how many
// checks were denied or failed.
func insert(l limiter, n int) int {
	var buf [32]byte
	denied := 0
	for i := range n {
		key := string(strconv.AppendInt(append(buf[:0], "user:"...), int64(i), 10))
		if ok, err := l.allow(key); !ok || err != nil {
			denied++
		}
	}
	return denied
}

// missing returns how many of the keys insert checked l does not hold.
func missing(l limiter, n int) int {
	var buf [32]byte
	m := 0
	for i := range n {
		if !l.held(string(strconv.AppendInt(append(buf[:0], "user:"...), int64(i), 10))) {
			m++
		}
	}
	return m
}

// liveHeap returns the bytes of the heap still reachable after a full
// collection; the second collection frees what the first one's
// finalizers released.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
