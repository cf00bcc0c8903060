package hybrid

import (
	"math"
	"time"

	"github.com/bouncerhq/bouncer"
)

// AsyncBound is the most units of l one instance can admit in one sync
// interval on its own view: a bucket's burst and what it refills in the
// interval, a window's rate (its view may be a whole window behind).
// Async mode admits at most (instances − 1) × AsyncBound more than l.
func AsyncBound(l bouncer.Limit, interval time.Duration) int64 {
	if !l.Algorithm.UsesBurst() {
		return l.Rate
	}
	refill := math.Ceil(float64(l.Rate) * float64(interval) / float64(l.Period))
	return l.Burst + int64(min(refill, float64(bouncer.MaxRate)))
}

// LeaseBound is how many units more than l a bucket in lease mode can
// admit, with leases of at most leaseTime: what it refills while a lease
// lives. A fixed window's is 0: the shared store never counts more than
// the limit, and a lease dies with its window.
func LeaseBound(l bouncer.Limit, leaseTime time.Duration) int64 {
	if !l.Algorithm.UsesBurst() {
		return 0
	}
	life := min(leaseTime, l.Period)
	return int64(math.Ceil(float64(l.Rate) * float64(life) / float64(l.Period)))
}
