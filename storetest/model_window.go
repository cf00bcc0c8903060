package storetest

import (
	"math/big"
	"time"
)

// window returns the index of the epoch-aligned window of period that
// holds t: ⌊t/period⌋.
func window(t, period int64) int64 {
	w := t / period
	if t%period != 0 && t < 0 {
		w--
	}
	return w
}

// fixedWindowModel counts units per window index. With chargeDenied it
// counts denied checks too, as envoyproxy/ratelimit does, but never past
// rate+1: a count above the rate only says "over".
type fixedWindowModel struct {
	rate, period int64
	chargeDenied bool
	counts       map[int64]int64
	// cal, for a calendar limit, returns the window that holds t, its
	// start and end; windows are then keyed by their start.
	cal func(t int64) (start, end int64)
}

// window returns the key of the window that holds t and its end.
func (m *fixedWindowModel) window(t int64) (w, end int64) {
	if m.cal != nil {
		return m.cal(t)
	}
	w = window(t, m.period)
	return w, (w + 1) * m.period
}

func (m *fixedWindowModel) Check(now, cost int64) Want {
	w, end := m.window(now)
	untilEnd := end - now
	reset := func(count int64) time.Duration {
		if count == 0 {
			return 0
		}
		return time.Duration(untilEnd)
	}
	allowed := m.counts[w]+cost <= m.rate
	if allowed || m.chargeDenied {
		m.counts[w] = min(m.counts[w]+cost, m.rate+1)
	}
	count := m.counts[w]
	switch {
	case cost > m.rate:
		return never(max(m.rate-count, 0), int64(reset(count)))
	case !allowed:
		return Want{Remaining: max(m.rate-count, 0), ResetAfter: reset(count), RetryAfter: time.Duration(untilEnd)}
	}
	return Want{Allowed: true, Remaining: m.rate - count, ResetAfter: reset(count)}
}

func (m *fixedWindowModel) Refund(now, n int64) {
	w, _ := m.window(now)
	m.counts[w] = max(m.counts[w]-n, 0)
}

// Charge counts cost more units in the current window, past the rate up
// to a full window (rate+1, "over", with chargeDenied): the window's end
// forgives the rest.
func (m *fixedWindowModel) Charge(now, cost int64) {
	w, _ := m.window(now)
	m.counts[w] = min(m.counts[w]+cost, m.top())
}

func (m *fixedWindowModel) top() int64 {
	if m.chargeDenied {
		return m.rate + 1
	}
	return m.rate
}

// slidingCounterModel counts units per window index and weighs the
// previous window with exact integers; RetryAfter is found by searching
// for the first instant at which the check passes. With chargeDenied,
// denied checks count too, up to rate+1 per window.
type slidingCounterModel struct {
	rate, period int64
	chargeDenied bool
	counts       map[int64]int64
}

// used returns ⌈prev × (P − e)/P⌉ + curr at t, the estimate a check
// compares with the rate.
func (m *slidingCounterModel) used(t int64) (weighted, curr int64) {
	w := window(t, m.period)
	prev := m.counts[w-1]
	left := (w+1)*m.period - t // P − e
	num := new(big.Int).Mul(big.NewInt(prev), big.NewInt(left))
	p := big.NewInt(m.period)
	num.Add(num, p).Sub(num, big.NewInt(1)) // ceiling
	return num.Quo(num, p).Int64(), m.counts[w]
}

// reset returns how long until both counts at t weigh nothing.
func (m *slidingCounterModel) reset(t int64) time.Duration {
	w := window(t, m.period)
	switch {
	case m.counts[w] > 0:
		return time.Duration((w+2)*m.period - t)
	case m.counts[w-1] > 0:
		return time.Duration((w+1)*m.period - t)
	}
	return 0
}

func (m *slidingCounterModel) passes(t, cost int64) bool {
	weighted, curr := m.used(t)
	return weighted+curr+cost <= m.rate
}

func (m *slidingCounterModel) Check(now, cost int64) Want {
	w := window(now, m.period)
	weighted, curr := m.used(now)
	allowed := weighted+curr+cost <= m.rate
	if allowed || m.chargeDenied {
		m.counts[w] = min(curr+cost, m.rate+1)
	}
	curr = m.counts[w]
	switch {
	case cost > m.rate:
		return never(max(m.rate-weighted-curr, 0), int64(m.reset(now)))
	case !allowed:
		// Two windows on, both counts are gone; nothing is charged before.
		at := earliest(now, (w+2)*m.period, func(t int64) bool { return m.passes(t, cost) })
		return Want{
			Remaining:  max(m.rate-weighted-curr, 0),
			ResetAfter: m.reset(now),
			RetryAfter: time.Duration(at - now),
		}
	}
	return Want{Allowed: true, Remaining: m.rate - weighted - curr, ResetAfter: m.reset(now)}
}

// Refund takes from the current window's count first, then the previous.
func (m *slidingCounterModel) Refund(now, n int64) {
	w := window(now, m.period)
	for _, i := range []int64{w, w - 1} {
		take := min(n, m.counts[i])
		m.counts[i] -= take
		n -= take
	}
}

// Charge counts cost more units in the current window, up to a full
// window (rate+1 with chargeDenied).
func (m *slidingCounterModel) Charge(now, cost int64) {
	w := window(now, m.period)
	top := m.rate
	if m.chargeDenied {
		top++
	}
	m.counts[w] = min(m.counts[w]+cost, top)
}
