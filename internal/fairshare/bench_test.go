package fairshare

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDivision divides a capacity among n demands drawn uniformly
// from [0, 1000), with a capacity of 250 per demand, so that the level
// (about 293) leaves most demands short. Level runs on a fresh copy of
// the unsorted demands each time, as rlqs gathers them from a map; the
// copy is part of the figure.
func BenchmarkDivision(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		demands := make([]float64, n)
		for i := range demands {
			demands[i] = r.Float64() * 1000
		}
		capacity := 250 * float64(n)
		b.Run(fmt.Sprintf("demands=%d/Level", n), func(b *testing.B) {
			b.ReportAllocs()
			scratch := make([]float64, n)
			for b.Loop() {
				copy(scratch, demands)
				if _, used := Level(capacity, scratch); used > capacity*(1+1e-9) || used < capacity*(1-1e-9) {
					b.Fatalf("used %v of %v", used, capacity)
				}
			}
		})
		b.Run(fmt.Sprintf("demands=%d/Shares", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s := Shares(capacity, demands); len(s) != n {
					b.Fatalf("got %d shares of %d demands", len(s), n)
				}
			}
		})
	}
}
