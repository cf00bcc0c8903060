package algo_test

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
)

// A clock that steps back across a window boundary (another instance's,
// a failed-over Redis's) must not wipe the newer window's count.
func TestWindowsSurviveAClockSteppingBack(t *testing.T) {
	const second = int64(time.Second)
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, a := range []bouncer.Algorithm{bouncer.FixedWindow, bouncer.SlidingWindowCounter} {
		t.Run(a.String(), func(t *testing.T) {
			l := bouncer.Limit{Name: "w", Algorithm: a, Rate: 3, Period: time.Second}
			var s algo.State
			// Fill the window that starts at start+1s.
			for i := range 3 {
				var r algo.Result
				s, r = algo.Check(l, s, start+second+int64(i), 1)
				if !r.Allowed {
					t.Fatalf("check %d in the new window denied", i)
				}
			}
			// A check stamped just before that window must not pass.
			_, r := algo.Check(l, s, start+second-1, 1)
			if r.Allowed {
				t.Fatalf("a check from a clock 1ns behind passed a full window: %+v", r)
			}
		})
	}
}
