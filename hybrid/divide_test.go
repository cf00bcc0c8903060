package hybrid

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/fairshare"
	"github.com/bouncerhq/bouncer/store"
)

// What divide gives out adds up to the pool, each gets at least its
// max-min fair share, and no one more than its share and what is left
// over.
func TestDivideProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pool := rapid.Float64Range(0, 1e6).Draw(t, "pool")
		demands := rapid.SliceOfN(rapid.Float64Range(0, 1e5), 1, 16).Draw(t, "demands")
		fair := fairshare.Shares(pool, demands)
		got := divide(pool, append([]float64(nil), demands...))
		sum, fairSum := 0.0, 0.0
		for k := range got {
			sum += got[k]
			fairSum += fair[k]
			if got[k] < fair[k]-1e-6*max(1, fair[k]) {
				t.Fatalf("share %d: %v, below its fair share %v", k, got[k], fair[k])
			}
		}
		if sum > pool*(1+1e-9)+1e-9 {
			t.Fatalf("shares add up to %v, over the pool %v", sum, pool)
		}
		if left := pool - fairSum; left > 1e-6*max(1, pool) && math.Abs(sum-pool) > 1e-6*max(1, pool) {
			t.Fatalf("shares add up to %v of %v with %v left over", sum, pool, left)
		}
	})
}

// An instance's allowance never takes more than what the others'
// allowances leave, and one joining takes its share all the same.
func TestAllowanceLeavesOthersTheirs(t *testing.T) {
	l := bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: 300, Period: 2 * time.Second}
	others := []store.Share{
		{Instance: "b", Demand: 100, Allowance: 90, Window: 7},
		{Instance: "c", Demand: 100, Allowance: 60, Window: 7},
	}
	// Demands of 10 units an interval each over a pool of 200: a third each,
	// 67, but the others hold 150.
	if a := allowanceOf(&l, 200, others, false); a != 50 {
		t.Errorf("allowance %d, want 50 (the pool less the others' 150)", a)
	}
	if a := allowanceOf(&l, 200, others, true); a != 67 {
		t.Errorf("joining: allowance %d, want its share 67", a)
	}
	// An other whose share is of the last window holds its share of the
	// whole rate: 100 each.
	others[1].Window = 6
	if a := allowanceOf(&l, 200, others, false); a != 10 {
		t.Errorf("allowance %d, want 10 (the pool less 90 and the other's 100 of the rate)", a)
	}
}

// allowanceOf is the allowance of an instance asked for 100 units a
// second, in window 7 of l, with an interval of 100 ms.
func allowanceOf(l *bouncer.Limit, pool float64, others []store.Share, joining bool) int64 {
	d := division{l: l, pool: pool, mine: 100, others: others, win: 7, interval: 100 * time.Millisecond, joining: joining}
	a, _, _ := d.allowance()
	return a
}
