package storetest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/storetest"
)

func TestRunNaiveStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
		return newNaiveStore(func() int64 { return clock.Now().UnixNano() })
	})
}

// TestModelScenarios checks the reference models against the hand-written
// tables: two independent definitions that must agree.
func TestModelScenarios(t *testing.T) {
	for _, sc := range storetest.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			m := storetest.NewModel(sc.Limit)
			for i, st := range sc.Steps {
				now := storetest.Start.Add(st.At).UnixNano()
				switch {
				case st.Refund:
					m.Refund(now, st.Cost)
					continue
				case st.Charge:
					m.Charge(now, st.Cost)
					continue
				}
				if got := m.Check(now, st.Cost); got != st.Want {
					t.Errorf("step %d (at %v, cost %d): got %v, want %v", i, st.At, st.Cost, got, st.Want)
				}
			}
		})
	}
}

func TestScenariosWellFormed(t *testing.T) {
	names := map[string]bool{}
	covered := map[bouncer.Algorithm]bool{}
	for _, sc := range storetest.Scenarios() {
		if names[sc.Name] {
			t.Errorf("scenario %q: name used twice", sc.Name)
		}
		names[sc.Name] = true
		covered[sc.Limit.Algorithm] = true
		if err := sc.Limit.Validate(); err != nil {
			t.Errorf("scenario %q: %v", sc.Name, err)
		}
		for i := 1; i < len(sc.Steps); i++ {
			if sc.Steps[i].At < sc.Steps[i-1].At {
				t.Errorf("scenario %q: step %d at %v is before step %d at %v", sc.Name, i, sc.Steps[i].At, i-1, sc.Steps[i-1].At)
			}
		}
	}
	for _, a := range bouncer.Algorithms() {
		if !covered[a] {
			t.Errorf("no scenario for %v", a)
		}
	}
}

func TestClock(t *testing.T) {
	c := storetest.NewClock(storetest.Start)
	c.Advance(1500 * time.Millisecond)
	if got, want := c.Now(), storetest.Start.Add(1500*time.Millisecond); !got.Equal(want) {
		t.Errorf("after Advance: got %v, want %v", got, want)
	}
	later := storetest.Start.Add(time.Hour)
	c.Set(later)
	if got := c.Now(); !got.Equal(later) {
		t.Errorf("after Set: got %v, want %v", got, later)
	}
}

func TestStartAligned(t *testing.T) {
	for _, p := range []time.Duration{time.Nanosecond, time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour} {
		if r := storetest.Start.UnixNano() % int64(p); r != 0 {
			t.Errorf("Start is %v past a multiple of %v, want 0", time.Duration(r), p)
		}
	}
}

func ExampleWant_String() {
	fmt.Println(storetest.Want{Remaining: 3, RetryAfter: bouncer.Never})
	// Output: {allowed false, remaining 3, reset 0s, retry never, delay 0s}
}
