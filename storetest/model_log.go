package storetest

import (
	"slices"
	"time"
)

// slidingLogModel keeps the instant of every admitted unit, grouped by
// the check or charge that brought them: a charge that finds more than
// rate groups in the window joins the newest group, moved to now.
type slidingLogModel struct {
	rate, period int64
	units        []int64 // admission instants, oldest first
	groups       []int64 // how many of units each check or charge brought, oldest first
}

// drop forgets the units admitted at or before now − P.
func (m *slidingLogModel) drop(now int64) {
	for len(m.units) > 0 && m.units[0] <= now-m.period {
		m.units = m.units[1:]
		if m.groups[0]--; m.groups[0] == 0 {
			m.groups = m.groups[1:]
		}
	}
}

func (m *slidingLogModel) add(now, cost int64) {
	for range cost {
		m.units = append(m.units, now)
	}
	m.groups = append(m.groups, cost)
}

func (m *slidingLogModel) Check(now, cost int64) Want {
	m.drop(now)
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
	if cost > 0 {
		m.add(now, cost)
		reset = m.period
	}
	return Want{Allowed: true, Remaining: m.rate - used - cost, ResetAfter: time.Duration(reset)}
}

// Refund forgets the newest units.
func (m *slidingLogModel) Refund(now, n int64) {
	m.drop(now)
	for n > 0 && len(m.groups) > 0 {
		last := len(m.groups) - 1
		take := min(n, m.groups[last])
		m.units = m.units[:int64(len(m.units))-take]
		n -= take
		if m.groups[last] -= take; m.groups[last] == 0 {
			m.groups = m.groups[:last]
		}
	}
}

// Charge logs cost units at now whatever the window holds.
func (m *slidingLogModel) Charge(now, cost int64) {
	m.drop(now)
	if last := len(m.groups) - 1; int64(len(m.groups)) > m.rate {
		for i := int64(len(m.units)) - m.groups[last]; i < int64(len(m.units)); i++ {
			m.units[i] = now
		}
		for range cost {
			m.units = append(m.units, now)
		}
		m.groups[last] += cost
		return
	}
	m.add(now, cost)
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
