package rules

import (
	"context"
	"errors"
	"slices"

	"github.com/bouncerhq/bouncer"
)

// charge is one key that Decide charged: cost units to limits, for rule
// (nil for a descriptor that set its own limit).
type charge struct {
	rule   *Rule
	key    string
	limits []bouncer.Limit
	cost   int64
}

// charged records that dec, the check of m's descriptor on its own,
// charged it.
func (r *Response) charged(m *matched, dec bouncer.Decision) {
	if dec.Allowed && m.cost > 0 {
		r.charges = append(r.charges, charge{rule: m.rule, key: m.key, limits: m.limits, cost: m.cost})
	}
}

// Holds reports whether Decide charged, for resp, a limit that only
// selects (see Refund): whether a Refund with only would give anything
// back. A caller that holds nothing can skip tracking the request's end.
func (r *Response) Holds(only func(r *Rule, l bouncer.Limit) bool) bool {
	for _, c := range r.charges {
		for _, l := range c.limits {
			if only(c.rule, l) {
				return true
			}
		}
	}
	return false
}

// Refund gives back units that Decide charged for resp, for a caller that
// learns how the request ended: it releases concurrency leases when the
// request ends, and gives units back when the request failed (those of
// rules with RefundOn5xx, when the upstream answers 5xx). For every key
// that resp's checks charged (an allowed descriptor's, a shadow rule's
// included; never an over-limit or unlimited descriptor's), Refund gives
// the descriptor's cost back, with bouncer.Limiter.Refund, to the key's
// limits that only selects; a nil only selects every limit. only is given
// the rule that charged the key (nil for a descriptor that set its own
// limit) and one of its limits.
//
// What Refund gives back, or tries to, is taken out of *resp, so that no
// unit is given back twice: a caller may refund some rules' units when
// the request fails and release every lease when it ends, in either
// order. A denied response can hold charges too (its shadow rules'
// allowed checks, leases included; under envoy semantics, its allowed
// descriptors), so a caller that holds leases calls Refund at the end of
// every request it decided, whatever the answer. The limits given back
// are those that were charged, even if the engine serves another config
// by then.
//
// ctx bounds the store's calls: to release after the client has gone
// away, pass context.WithoutCancel. The error joins the store's failures;
// the rest is given back regardless. Refund is safe for concurrent use,
// but not on one Response at once.
func (e *Engine) Refund(ctx context.Context, resp *Response, only func(r *Rule, l bouncer.Limit) bool) error {
	var reqs []bouncer.Request // one per cost; a key at most once in each
	var kept []charge
	for _, c := range resp.charges {
		give, keep := c.limits, []bouncer.Limit(nil)
		if only != nil {
			give = nil
			for _, l := range c.limits {
				if only(c.rule, l) {
					give = append(give, l)
				} else {
					keep = append(keep, l)
				}
			}
		}
		if len(keep) > 0 {
			kept = append(kept, charge{rule: c.rule, key: c.key, limits: keep, cost: c.cost})
		}
		if len(give) == 0 {
			continue
		}
		i := slices.IndexFunc(reqs, func(r bouncer.Request) bool {
			return r.Cost == c.cost && !slices.ContainsFunc(r.Keys, func(k bouncer.KeyLimits) bool { return k.Key == c.key })
		})
		if i < 0 {
			i = len(reqs)
			reqs = append(reqs, bouncer.Request{Cost: c.cost})
		}
		reqs[i].Keys = append(reqs[i].Keys, bouncer.KeyLimits{Key: c.key, Limits: give})
	}
	resp.charges = kept
	var errs []error
	for _, r := range reqs {
		if err := e.limiter().Refund(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// leases selects concurrency limits.
func leases(_ *Rule, l bouncer.Limit) bool { return l.Algorithm == bouncer.Concurrency }
