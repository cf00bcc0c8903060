package redisstore

import (
	"sync/atomic"
	"time"
)

// window counts a breaker's failures and slow calls over the last
// healthWindow, in windowBuckets spans of it, and the calls made before
// the first of each span's. A call that succeeds touches no bucket: the
// healthy path costs the breaker an atomic add.
type window [windowBuckets]bucket

// bucket counts the failures and slow calls of one span, and the calls
// before its first. Its counts are approximate: an event that races the
// bucket's reset may be lost, which the rates it feeds can afford.
type bucket struct {
	slot            atomic.Int64 // which span of time it counts (see span)
	before          atomic.Uint64
	failures, slowN atomic.Uint32
}

// span is the index of the bucket span t falls in, counted from the Unix
// epoch (so that any clock a test pins is after its start).
func span(t time.Time) int64 {
	return t.UnixNano() / int64(healthWindow/windowBuckets)
}

// count records a failure or a slow call at t, the calls'th.
func (w *window) count(t time.Time, o outcome, calls uint64) {
	s := span(t)
	b := &w[s%windowBuckets]
	if old := b.slot.Load(); old != s && b.slot.CompareAndSwap(old, s) {
		b.before.Store(calls - 1)
		b.failures.Store(0)
		b.slowN.Store(0)
	}
	switch o {
	case failed:
		b.failures.Add(1)
	case timedOut:
		b.slowN.Add(1)
	}
}

// sum sums the failures and slow calls of the last healthWindow before t,
// and counts the calls made since the first of them, of total.
func (w *window) sum(t time.Time, total uint64) (calls, failures, slow uint64) {
	s := span(t)
	first := total
	for i := range w {
		b := &w[i]
		if age := s - b.slot.Load(); age >= 0 && age < windowBuckets {
			failures += uint64(b.failures.Load())
			slow += uint64(b.slowN.Load())
			first = min(first, b.before.Load())
		}
	}
	return total - first, failures, slow
}

// reset forgets every count.
func (w *window) reset() {
	for i := range w {
		w[i].slot.Store(-2 * windowBuckets)
	}
}
