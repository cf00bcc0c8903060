package store

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// Interval is the time one unit of l takes to refill or drain:
// Period/Rate, rounded up to a whole nanosecond so that a limit never
// admits more than its rate. It is 0 when Rate or Period is not
// positive, and meaningful only for a valid limit.
// Limit.Validate bounds a bucket's Burst × Interval by twice
// bouncer.MaxPeriod, so that a store's arithmetic in nanoseconds stays
// inside int64.
func Interval(l bouncer.Limit) time.Duration {
	if l.Rate <= 0 || l.Period <= 0 {
		return 0
	}
	return (l.Period + time.Duration(l.Rate) - 1) / time.Duration(l.Rate)
}
