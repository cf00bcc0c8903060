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
	for _, l := range []bouncer.Limit{
		{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 3, Period: time.Second},
		{Name: "w", Algorithm: bouncer.SlidingWindowCounter, Rate: 3, Period: time.Second},
		{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 3, Period: time.Second, ChargeDenied: true},
		{Name: "w", Algorithm: bouncer.SlidingWindowCounter, Rate: 3, Period: time.Second, ChargeDenied: true},
	} {
		t.Run(l.String(), func(t *testing.T) {
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
			next, r := algo.Check(l, s, start+second-1, 1)
			if r.Allowed {
				t.Fatalf("a check from a clock 1ns behind passed a full window: %+v", r)
			}
			if l.ChargeDenied {
				// It is charged to the newer window, now over.
				if _, peek := algo.Check(l, next, start+second+3, 0); peek.Allowed {
					t.Fatalf("a peek after a denied check charged from a clock 1ns behind: got %+v, want denied", peek)
				}
			}
		})
	}
}
