package bouncer_test

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
)

func TestInterval(t *testing.T) {
	for _, c := range []struct {
		rate   int64
		period time.Duration
		want   time.Duration
	}{
		{10, time.Second, 100 * time.Millisecond},
		{3, time.Second, 333333334}, // rounded up
		{1, time.Nanosecond, 1},
		{0, time.Second, 0},
		{1, 0, 0},
		{-1, time.Second, 0},
	} {
		if got := (bouncer.Limit{Rate: c.rate, Period: c.period}).Interval(); got != c.want {
			t.Errorf("Interval of %d/%v: got %v, want %v", c.rate, c.period, got, c.want)
		}
	}
}

// Validate's bound on a bucket is Burst × Interval ≤ 2 × MaxPeriod, with
// Limit.Interval: the largest burst it accepts reaches the bound,
// and one more goes past it.
func TestIntervalBoundsValidate(t *testing.T) {
	for _, rp := range []struct {
		rate   int64
		period time.Duration
	}{{3, time.Second}, {7, bouncer.MaxPeriod}, {1, bouncer.MaxPeriod}} {
		l := bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: rp.rate, Period: rp.period}
		l.Burst = min(int64(2*bouncer.MaxPeriod)/int64(l.Interval()), bouncer.MaxRate)
		if err := l.Validate(); err != nil {
			t.Errorf("%v: got %v, want valid", l, err)
		}
		if l.Burst == bouncer.MaxRate {
			continue
		}
		l.Burst++
		if err := l.Validate(); err == nil {
			t.Errorf("%v: got valid, want a burst past 2×MaxPeriod refused", l)
		}
	}
}
