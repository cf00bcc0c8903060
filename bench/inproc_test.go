package bench

import (
	"fmt"
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

// BenchmarkCheck measures one check of an existing key: every key is
// warmed before the clock starts, every check must be allowed, and every
// key must still be held afterwards.
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
