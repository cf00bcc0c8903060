package storetest

import (
	"fmt"
	"time"

	"github.com/bouncerhq/bouncer"
)

// Model is a naive, obviously correct reference for one algorithm on one
// key. It is written from the semantics that package algo documents, not
// from its code: buckets count tokens as exact rationals, windows keep a
// map from window to count, the log algorithms keep one entry per unit.
// Times are Unix nanoseconds and must never decrease from one call to the
// next. A Model is not safe for concurrent use.
type Model interface {
	// Check decides a check of cost units at now, charging it if allowed.
	Check(now int64, cost int64) Want
	// Refund gives n units back at now, never above capacity.
	Refund(now int64, n int64)
}

// NewModel returns a fresh key's model under l, which must be valid.
// Models keep memory in proportion to the units they count for the log
// algorithms: use them with small rates.
func NewModel(l bouncer.Limit) Model {
	if err := l.Validate(); err != nil {
		panic(fmt.Sprintf("storetest: NewModel: %v", err))
	}
	switch l.Algorithm {
	case bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket:
		return newBucketModel(l)
	case bouncer.FixedWindow:
		return &fixedWindowModel{rate: l.Rate, period: int64(l.Period), chargeDenied: l.ChargeDenied, counts: map[int64]int64{}}
	case bouncer.SlidingWindowCounter:
		return &slidingCounterModel{rate: l.Rate, period: int64(l.Period), chargeDenied: l.ChargeDenied, counts: map[int64]int64{}}
	case bouncer.SlidingWindowLog:
		return &slidingLogModel{rate: l.Rate, period: int64(l.Period)}
	case bouncer.Concurrency:
		return &concurrencyModel{rate: l.Rate, period: int64(l.Period)}
	}
	panic(fmt.Sprintf("storetest: NewModel: no model for %v", l.Algorithm))
}

// never is the answer to a cost above capacity: the state as it stands
// (charged only under ChargeDenied), and a retry that never comes.
func never(remaining int64, reset int64) Want {
	return Want{Remaining: remaining, ResetAfter: time.Duration(reset), RetryAfter: bouncer.Never}
}

// earliest returns the least t in [lo, hi] with ok(t), given that ok is
// monotone (false then true) and ok(hi) holds.
func earliest(lo, hi int64, ok func(int64) bool) int64 {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
