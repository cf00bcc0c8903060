package hybrid

import (
	"context"
	"math"
	"time"

	"github.com/bouncerhq/bouncer"
)

// life is how long a bucket's lease of l lives at most, in ns (a fixed
// window's lives as long as its window), and the span over which a
// pair's demand is counted.
func (h *Limiter) life(l *bouncer.Limit) int64 { return int64(min(h.leaseTime, l.Period)) }

// roll starts a new span of demand when the last one is a lease's life
// old: the units asked in it become the previous span's. The shard must
// be locked.
func (h *Limiter) roll(e *entry, l *bouncer.Limit, now int64) {
	life := h.life(l)
	if now-e.since < life {
		return
	}
	e.prevAsked = e.asked
	if now-e.since >= 2*life {
		e.prevAsked = 0
	}
	e.asked, e.since = 0, now
}

// leaseParts is how many leases a window's demand of one span is taken
// in: fewer leave more units parked at the window's end
// (TestLeaseFalseDenials), more make more calls.
const leaseParts = 2

// size returns the lease to ask for: the units the pair's local demand
// spent in the last lease's life (the larger of the last span and the
// current one; for a fixed window, no more than in the time left in the
// window), at least cost, at most the limit's capacity and an
// eighth of what the shared limit had left at the last grant. A cold
// pair asks for its cost alone: strict. The fractions are measured
// (docs/hybrid.md): they keep the units left parked when a window runs
// out, which another instance could have spent, under 1% of checks.
//
// After a hold (see hold), the pair asks for the units it waited for.
func (h *Limiter) size(e *entry, l *bouncer.Limit, cost, now int64) int64 {
	h.roll(e, l, now)
	if n := e.holdAsk; n > 0 {
		e.holdAsk = 0
		return max(n, cost)
	}
	n := max(e.prevAsked, e.asked)
	if l.Algorithm == bouncer.FixedWindow {
		// A window's lease lives until the window ends: what the demand
		// spends in the time left, not in a whole span, so that few units
		// are left parked at its end, where another instance might have
		// spent them.
		span, left := h.life(l), untilEnd(l, now)
		n = int64(min(math.Ceil(float64(n)*float64(min(left, span))/float64(span)), float64(l.Capacity())))
	}
	n = min(n, l.Capacity())
	if e.granted {
		n = min(n, e.rem/8)
	}
	if e.sharing && e.allowWin == window(l, now) {
		// A pair that shares a global window (regions) spends at most its
		// allowance until its next sync: a lease larger would park units
		// its region's store counts as used, and no instance could spend.
		n = min(n, cost+max(e.allow, 0))
	}
	return max(n, cost)
}

// hold makes a bucket pair whose local demand alone is over what the
// bucket refills wait, after a denial at cost, until the bucket could
// hold a whole lease (its demand, at most its capacity), and then ask for
// it: without it, every unit the bucket refills would be a lease of one,
// fought for by every instance, and most checks a round trip. The units
// admitted over time are about the same; they come in leases. It reports
// false, to cache the denial as it is, for a window, or a pair whose
// demand the bucket's rate serves (a denial then is a burst's, and
// holding would deny what strict mode allows). The shard must be locked.
func (h *Limiter) hold(e *entry, l *bouncer.Limit, cost, now int64, d *bouncer.Decision) bool {
	if !l.Algorithm.UsesBurst() || d.RetryAfter == bouncer.Never {
		return false
	}
	demand := max(e.prevAsked, e.asked)
	k := min(demand, l.Capacity())
	if k <= cost || demand <= LeaseBound(*l, h.leaseTime) {
		return false
	}
	e.deniedCost, e.denied, e.deniedAt = 1, *d, now
	e.denied.Remaining = 0
	e.deniedUntil = now + int64(d.RetryAfter) + (k-cost)*int64(l.Interval())
	h.cachedUntil(e.deniedUntil)
	e.holdAsk = k
	h.stats.holds.Add(1)
	return true
}

// granted records the shared store's answer d to p's lease ask, made at
// now: a lease when allowed, a cached denial when denied at the check's
// cost. It keeps the lease invariant with take: the units a lease holds
// are units the shared store has charged (the ask, with the old lease's
// p.use, less the check's cost), spendable only until the lease ends;
// a denied or degraded ask gives p.use back to the old lease, if it
// has not ended.
func (h *Limiter) granted(p *part, d bouncer.Decision, cost, now int64) {
	p.d, p.known = d, true
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	e := h.get(p.sh, p.id, p.l, now)
	if e == nil {
		return
	}
	if !d.Allowed || d.Degraded {
		if p.use > 0 && now < e.until { // the units taken toward the cost
			e.units += p.use
			h.stats.unitsParked.Add(p.use)
		}
		if d.Degraded {
			// Decided by policy: under local, the store's local limiter
			// was charged the whole ask, of which the pair keeps nothing.
			// It asks for its cost alone until the shared store grants
			// again, so that the local limiter is charged what it admits.
			e.asked, e.prevAsked = 0, 0
		}
		if !d.Degraded && p.ask+p.use == cost && !h.hold(e, p.l, cost, now, &d) {
			e.deniedCost, e.denied, e.deniedAt = cost, d, now
			e.deniedUntil = math.MaxInt64
			if d.RetryAfter != bouncer.Never {
				e.deniedUntil = now + int64(d.RetryAfter)
			}
			h.cachedUntil(e.deniedUntil)
		}
		return
	}
	if e.units > 0 && now >= e.until {
		h.stats.leasesExpired.Add(1)
		h.stats.unitsParked.Add(-e.units)
		e.units = 0
	}
	until := now + h.life(p.l)
	if p.l.Algorithm == bouncer.FixedWindow {
		// A lease lives as long as its window: its units, given back or
		// not, are the window's, and this instance may as well spend them.
		until = now + int64(d.ResetAfter)
	}
	if p.use > 0 || e.units > 0 {
		until = min(until, e.until) // units of the last lease are in it
	}
	e.units, e.until = e.units+p.use+p.ask-cost, until
	e.rem, e.resetAt, e.granted = d.Remaining, now+int64(d.ResetAfter), true
	e.deniedUntil = 0
	h.stats.leasesTaken.Add(1)
	h.stats.unitsParked.Add(p.use + p.ask - cost)
	p.took = true
	p.d = e.decision(p, now)
}

// decision is what a check spent from e's lease reports: the shared
// limit's remaining at the grant plus the lease's, and its reset then.
func (e *entry) decision(p *part, now int64) bouncer.Decision {
	return bouncer.Decision{
		Allowed:    true,
		Capacity:   p.l.Capacity(),
		Remaining:  min(e.rem+e.units, p.l.Capacity()),
		ResetAfter: time.Duration(max(e.resetAt-now, 0)),
		Key:        p.key,
		LimitName:  p.l.Name,
	}
}

// endLeases ends the leases that end before the next tick (all of them,
// with every), giving back the units left of buckets' leases. A window's
// units stay charged: given back later, they could land in the next
// window, which has not paid for them.
//
// With no units parked it looks at the entries (to drop the idle ones)
// only every tenth tick.
func (h *Limiter) endLeases(ctx context.Context, every bool) {
	if !every && h.stats.unitsParked.Load() == 0 && h.idleTicks.Add(1)%10 != 0 {
		return
	}
	now := h.now().UnixNano()
	horizon := now + int64(h.interval)
	byUnits := map[int64][]bouncer.KeyLimits{}
	for s := range h.shards {
		sh := &h.shards[s]
		sh.mu.Lock()
		for i, e := range sh.m {
			if e.units > 0 && (every || e.until <= horizon) {
				if now < e.until && e.lim.Algorithm.UsesBurst() {
					byUnits[e.units] = append(byUnits[e.units], bouncer.KeyLimits{Key: i.key, Limits: []bouncer.Limit{e.lim}})
					h.stats.leasesReturned.Add(1)
				} else {
					h.stats.leasesExpired.Add(1)
				}
				h.stats.unitsParked.Add(-e.units)
				e.units = 0
			}
			if e.idle(now) && now-e.since >= 2*h.life(&e.lim) {
				delete(sh.m, i)
			}
		}
		sh.mu.Unlock()
	}
	for n, keys := range byUnits {
		_ = h.shared.Refund(ctx, bouncer.Request{Keys: keys, Cost: n})
	}
}
