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
// next. A limit whose state reaches 2⁵¹ ns or more from now (see
// microseconds) is modelled as the same limit counted in microseconds.
// A Model is not safe for concurrent use.
type Model interface {
	// Check decides a check of cost units at now, charging it if allowed.
	Check(now int64, cost int64) Want
	// Refund gives n units back at now, never above capacity.
	Refund(now int64, n int64)
	// Charge takes cost units at now whatever the state holds, past the
	// capacity if need be (a debt; docs/algorithms.md). It is not called
	// for Concurrency or a shaping leaky bucket.
	Charge(now int64, cost int64)
}

// NewModel returns a fresh key's model under l, which must be valid.
// Models keep memory in proportion to the units they count for the log
// algorithms: use them with small rates.
func NewModel(l bouncer.Limit) Model {
	if err := l.Validate(); err != nil {
		panic(fmt.Sprintf("storetest: NewModel: %v", err))
	}
	if !l.Calendar.IsZero() {
		return calendarModel(l)
	}
	if microseconds(l) {
		// The same limit with every duration in microseconds, read as
		// nanoseconds: its period rounded up, every instant down.
		l.Period = (l.Period + time.Microsecond - 1) / time.Microsecond
		return &microModel{newModel(l)}
	}
	return newModel(l)
}

func newModel(l bouncer.Limit) Model {
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

// calendarModel is the fixed window model of a calendar limit, its
// windows found by calendar.Period.Window; counted in microseconds, the
// model reads instants and durations in them.
func calendarModel(l bouncer.Limit) Model {
	micro := microseconds(l)
	m := &fixedWindowModel{rate: l.Rate, chargeDenied: l.ChargeDenied, counts: map[int64]int64{}}
	m.cal = func(t int64) (int64, int64) {
		if micro {
			t *= 1000
		}
		start, end := l.Calendar.Window(time.Unix(0, t))
		if micro {
			return start.UnixMicro(), end.UnixMicro()
		}
		return start.UnixNano(), end.UnixNano()
	}
	if micro {
		return &microModel{m}
	}
	return m
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

// microseconds reports whether l counts in microseconds: when its state
// can reach 2⁵¹ ns (about 26 days) from now or more — a bucket's Burst
// intervals, a window's Period (twice it for a sliding window counter),
// a log's Period — so that every number the Redis store's Lua forms fits
// a double (docs/redis.md).
func microseconds(l bouncer.Limit) bool {
	const fine = 1 << 51
	switch l.Algorithm {
	case bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket:
		return l.Burst*int64(l.Interval()) >= fine
	case bouncer.SlidingWindowCounter:
		return 2*l.Period >= fine
	}
	return l.Period >= fine
}

// microModel runs a model of a limit counted in microseconds.
type microModel struct{ m Model }

func (u *microModel) Check(now, cost int64) Want {
	w := u.m.Check(floorMicro(now), cost)
	w.ResetAfter *= time.Microsecond
	if w.RetryAfter != bouncer.Never {
		w.RetryAfter *= time.Microsecond
	}
	w.Delay *= time.Microsecond
	return w
}

func (u *microModel) Refund(now, n int64) { u.m.Refund(floorMicro(now), n) }

func (u *microModel) Charge(now, cost int64) { u.m.Charge(floorMicro(now), cost) }

func floorMicro(t int64) int64 {
	q := t / 1000
	if t%1000 < 0 {
		q--
	}
	return q
}
