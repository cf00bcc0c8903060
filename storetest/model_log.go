package storetest

import (
	"slices"
	"time"
)

// slidingLogModel keeps the instant of every admitted unit.
type slidingLogModel struct {
	rate, period int64
	units        []int64 // admission instants, oldest first
}

// inWindow returns the units admitted in (now − P, now], oldest first.
func (m *slidingLogModel) inWindow(now int64) []int64 {
	var in []int64
	for _, t := range m.units {
		if t > now-m.period {
			in = append(in, t)
		}
	}
	return in
}

func (m *slidingLogModel) Check(now, cost int64) Want {
	m.units = m.inWindow(now)
	used := int64(len(m.units))
	reset := int64(0)
	if used > 0 {
		reset = m.units[used-1] + m.period - now
	}
	if cost > m.rate {
		return never(max(m.rate-used, 0), reset)
	}
	if over := used + cost - m.rate; over > 0 {
		// The over-th oldest unit leaves the window P after it came.
		return Want{
			Remaining:  max(m.rate-used, 0),
			ResetAfter: time.Duration(reset),
			RetryAfter: time.Duration(m.units[over-1] + m.period - now),
		}
	}
	for range cost {
		m.units = append(m.units, now)
	}
	if cost > 0 {
		reset = m.period
	}
	return Want{Allowed: true, Remaining: m.rate - used - cost, ResetAfter: time.Duration(reset)}
}

// Refund forgets the newest units.
func (m *slidingLogModel) Refund(now, n int64) {
	m.units = m.inWindow(now)
	m.units = m.units[:max(int64(len(m.units))-n, 0)]
}

// Charge logs cost units at now whatever the window holds; a window
// holding more than the rate has its newest units moved to now too. A
// charge of nothing changes nothing.
func (m *slidingLogModel) Charge(now, cost int64) {
	m.units = m.inWindow(now)
	if cost == 0 {
		return
	}
	if n := len(m.units); int64(n) > m.rate {
		newest := m.units[n-1]
		for i := n - 1; i >= 0 && m.units[i] == newest; i-- {
			m.units[i] = now
		}
	}
	for range cost {
		m.units = append(m.units, now)
	}
}

// concurrencyModel keeps the expiry of every unit in flight.
type concurrencyModel struct {
	rate, period int64
	leases       []int64 // expiry instants, sorted
}

func (m *concurrencyModel) live(now int64) {
	m.leases = slices.DeleteFunc(m.leases, func(at int64) bool { return at <= now })
}

func (m *concurrencyModel) Check(now, cost int64) Want {
	m.live(now)
	active := int64(len(m.leases))
	reset := int64(0)
	if active > 0 {
		reset = m.leases[active-1] - now
	}
	if cost > m.rate {
		return never(m.rate-active, reset)
	}
	if over := active + cost - m.rate; over > 0 {
		return Want{
			Remaining:  m.rate - active,
			ResetAfter: time.Duration(reset),
			RetryAfter: time.Duration(m.leases[over-1] - now),
		}
	}
	for range cost {
		m.leases = append(m.leases, now+m.period)
	}
	if cost > 0 {
		reset = m.period
	}
	return Want{Allowed: true, Remaining: m.rate - active - cost, ResetAfter: time.Duration(reset)}
}

// Refund releases the oldest leases.
func (m *concurrencyModel) Refund(now, n int64) {
	m.live(now)
	m.leases = m.leases[min(n, int64(len(m.leases))):]
}

// Charge is never called: a lease cannot be charged after the fact.
func (m *concurrencyModel) Charge(now, cost int64) {
	panic("storetest: Concurrency cannot be charged")
}
