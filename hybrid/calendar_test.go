package hybrid_test

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/calendar"
	"github.com/bouncerhq/bouncer/hybrid"
)

// A calendar day in lease and async mode: two instances admit no more
// than the day's rate (async: and its bound) before local midnight, a
// denial's reset is midnight in the limit's zone, and the next day, 23
// hours long as clocks go forward, admits afresh and resets at its own
// end.
func TestCalendarModes(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []bouncer.Mode{bouncer.Lease, bouncer.Async} {
		t.Run(mode.String(), func(t *testing.T) {
			o := hybrid.Options{SyncInterval: 50 * time.Millisecond}
			f := newFleet(t, 2, o)
			l, err := bouncer.NewLimit(bouncer.Limit{Name: "day", Algorithm: bouncer.FixedWindow, Rate: 20, Calendar: calendar.Period{Unit: calendar.Day, Zone: "America/New_York"}, Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			bound := l.Rate
			if mode == bouncer.Async {
				bound += hybrid.AsyncBound(l, o.SyncInterval)
			}
			day := func(start time.Time, end time.Time) {
				t.Helper()
				f.clock.Set(start)
				admitted := int64(0)
				denied := 0
				for i := range 400 {
					now := f.clock.Now()
					d := check(t, f.ins[i%2], one("k", 1, l))
					switch {
					case d.Allowed:
						admitted++
					case d.ResetAfter != end.Sub(now):
						t.Fatalf("at %v: denied with reset after %v, want %v (the day's end, %v)", now, d.ResetAfter, end.Sub(now), end)
					default:
						denied++
					}
					f.clock.Advance(10 * time.Millisecond)
					if i%5 == 4 {
						f.tick()
					}
				}
				if admitted > bound || admitted < l.Rate || denied == 0 {
					t.Errorf("from %v: admitted %d, denied %d; want %d to %d admitted", start, admitted, denied, l.Rate, bound)
				}
			}
			day(time.Date(2026, 3, 7, 23, 59, 50, 0, ny), time.Date(2026, 3, 8, 0, 0, 0, 0, ny))
			day(time.Date(2026, 3, 8, 0, 0, 10, 0, ny), time.Date(2026, 3, 9, 0, 0, 0, 0, ny))
			if got := time.Date(2026, 3, 9, 0, 0, 0, 0, ny).Sub(time.Date(2026, 3, 8, 0, 0, 0, 0, ny)); got != 23*time.Hour {
				t.Fatalf("8 March 2026 in New York is %v long", got)
			}
		})
	}
}
