package hybrid

import "sync/atomic"

// Stats are a limiter's counters since it was made.
type Stats struct {
	LeasesTaken    uint64 // leases granted by the shared store
	LeasesReturned uint64 // ended with units left, given back
	LeasesExpired  uint64 // ended with units left, not given back (windows)
	UnitsParked    int64  // units in leases now, not yet spent
	Syncs          uint64 // pushes of async usage
	OverAdmitted   int64  // async units admitted past the shared limit, as pushes found
	CacheHits      uint64 // checks denied by the over-limit cache
	Holds          uint64 // over-demanded bucket pairs made to wait for a larger lease
	Throttled      uint64 // checks denied by the local pre-throttle
	Strict         uint64 // checks whose limits are all strict, sent to the shared store as they are (with regions, a fixed window held to its share first)
	Lease          uint64 // allowed lease-mode (key, limit) decisions
	Async          uint64 // allowed async-mode (key, limit) decisions
	Exchanges      uint64 // exchanges of async pairs' shares
	ShareDenied    uint64 // async checks denied because the instance's share was spent
}

type counters struct {
	leasesTaken, leasesReturned, leasesExpired atomic.Uint64
	unitsParked                                atomic.Int64
	syncs                                      atomic.Uint64
	overAdmitted                               atomic.Int64
	cacheHits, throttled, holds                atomic.Uint64
	strict, lease, async                       atomic.Uint64
	exchanges, shareDenied                     atomic.Uint64
}

// Stats returns the limiter's counters.
func (h *Limiter) Stats() Stats {
	c := &h.stats
	return Stats{
		LeasesTaken: c.leasesTaken.Load(), LeasesReturned: c.leasesReturned.Load(), LeasesExpired: c.leasesExpired.Load(),
		UnitsParked: c.unitsParked.Load(), Syncs: c.syncs.Load(), OverAdmitted: c.overAdmitted.Load(),
		CacheHits: c.cacheHits.Load(), Holds: c.holds.Load(), Throttled: c.throttled.Load(),
		Strict: c.strict.Load(), Lease: c.lease.Load(), Async: c.async.Load(),
		Exchanges: c.exchanges.Load(), ShareDenied: c.shareDenied.Load(),
	}
}
