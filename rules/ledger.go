package rules

import "github.com/bouncerhq/bouncer"

// charge is the Charge of cost units to limits under key, for rule (nil
// for a descriptor that set its own limit). Every charge is metered:
// Ledger.Settle settles it at the request's actual cost, in units (meter
// 0) or, for a priced rule, in money (its table's meter; see
// Response.Prices).
func charge(rule *Rule, key string, limits []bouncer.Limit, cost int64) bouncer.Charge {
	return bouncer.Charge{
		Key: key, Limits: limits, Cost: cost,
		RefundOnFailure: rule != nil && rule.RefundOn5xx,
		Shadow:          rule != nil && rule.Shadow,
		Metered:         true,
		Meter:           rule.meter(),
	}
}

// meter is the Meter of rule's charges: its price table's, or 0 for
// units (a nil rule's too).
func (r *Rule) meter() int {
	if r == nil || r.Prices == nil {
		return 0
	}
	return r.Prices.meter
}

// charged records that dec, the check of m's descriptor on its own,
// charged it.
func (r *Response) charged(m *matched, dec bouncer.Decision) {
	if dec.Allowed && m.cost > 0 {
		r.charges = append(r.charges, charge(m.rule, m.key, m.limits, m.cost))
	}
}

// Ledger is what Decide charged for r, for a caller that learns how the
// request ends: every key that r's checks charged (an allowed
// descriptor's, a shadow rule's included; never an over-limit or
// unlimited descriptor's), with the descriptor's cost. The caller
// releases its concurrency leases when the request ends (Ledger.Release
// or Ledger.End, with bouncer.Served), gives back the units of the rules
// with RefundOn5xx when it fails (bouncer.Failed), or everything but the
// shadow rules' units when it will not serve it (bouncer.Unserved), and
// settles a cost known only once it is served with Ledger.Settle (every
// charge is metered: by meter 0 for units, by its price table's for a
// priced rule, Response.Prices). A denied response can hold charges too
// (its shadow rules' allowed checks, leases included; under envoy
// semantics, its allowed descriptors), so a caller that holds leases
// ends every request it decided, whatever the answer. It is nil when
// Decide charged nothing.
//
// The first call makes the Ledger (a caller that never ends requests,
// such as the RLS service, allocates none); copies of r made after it
// share it. Ledger is not safe to call on one Response at once.
func (r *Response) Ledger() *bouncer.Ledger {
	if r.ledger == nil && len(r.charges) > 0 {
		r.ledger, r.charges = bouncer.NewLedger(r.lim, r.charges), nil
	}
	return r.ledger
}
