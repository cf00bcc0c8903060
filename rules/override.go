package rules

import (
	"fmt"

	"github.com/bouncerhq/bouncer"
)

// overrideLimit is the limit a descriptor's override sets in d.
func (d *Domain) overrideLimit(o *Override) bouncer.Limit {
	return bouncer.Limit{
		Name: limitName("", o.Unit), Algorithm: bouncer.FixedWindow,
		Rate: int64(o.RequestsPerUnit), Period: o.Unit.Duration(),
		ChargeDenied: d.Semantics == EnvoySemantics,
	}
}

// countLimit is the limit a descriptor is counted under in a domain of
// envoy semantics, a strict limit of the config's or a request's
// override alike: one per unit, whatever the rate, since
// envoyproxy/ratelimit keys a count by domain, entries and window, never
// by the limit. An override and a config rule on the same entries and
// unit share one count, and a request that changes its override
// mid-window (3 per minute, then 5), or a reload that changes
// requests_per_unit, reads the same count against the new rate (see
// matched.judge). Stores keep state per limit value, so the rate is fixed
// at the most a window of the unit can count, charging denied checks as
// the reference does.
func countLimit(u Unit) bouncer.Limit {
	p := u.Duration()
	return bouncer.Limit{
		Name: limitName("", u), Algorithm: bouncer.FixedWindow,
		Rate: min(bouncer.MaxRate, int64(p)-2), Period: p,
		ChargeDenied: true,
	}
}

// judge turns dec, the decision of m.request(), into the decision against
// the limit m reports: for a shared count, dec counts under countLimit,
// and the count after the charge is over the limit's rate when it exceeds
// it (envoyproxy/ratelimit's test), hits past the limit included. A rate
// of 0 so admits a peek while nothing was counted in the window, and no
// hit.
func (m *matched) judge(dec bouncer.Decision) bouncer.Decision {
	if !m.shared {
		return dec
	}
	rate, c := int64(m.report.RequestsPerUnit), m.limits[0].Rate
	count := c - dec.Remaining
	if !dec.Allowed {
		count = c + 1
	}
	dec.Capacity, dec.Remaining = rate, max(rate-count, 0)
	dec.Allowed = count <= rate
	switch {
	case dec.Allowed:
		dec.RetryAfter = 0
	case m.cost > rate:
		dec.RetryAfter = bouncer.Never
	default:
		dec.RetryAfter = dec.ResetAfter
	}
	return dec
}

// checkOverrides rejects overrides that are no valid limit
// (bouncer.Limit.Validate), such as a billion or more per second, which
// no store counts: they are the caller's mistake, not a store failure. A
// rate of 0 admits nothing and is never counted.
func (d *Domain) checkOverrides(r *Request) error {
	for i, desc := range r.Descriptors {
		if o := desc.Limit; o != nil && o.RequestsPerUnit > 0 {
			l := d.overrideLimit(o)
			if err := l.Validate(); err != nil {
				return fmt.Errorf("%w: descriptors[%d].limit: %v", bouncer.ErrInvalidRequest, i, err)
			}
		}
	}
	return nil
}
