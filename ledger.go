package bouncer

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// A Charge is one key that a decision charged one request: Cost units to
// Limits. It says, too, what goes back for each way the request ends.
type Charge struct {
	Key    string
	Limits []Limit
	Cost   int64

	// RefundOnFailure gives the units back when the request fails (a 5xx,
	// an upstream that broke off); its leases go back in any case.
	RefundOnFailure bool

	// Shadow says the rule only watched the request: when it is not
	// served, only the charge's leases go back, and its units stay counted.
	Shadow bool

	// Metered says Cost is an estimate, settled at the actual cost of the
	// request's meter Meter (Ledger.Settle). Concurrency and shaping
	// limits keep what they were charged.
	Metered bool
	Meter   int
}

// An Outcome is how a request that a decision charged ends.
type Outcome uint8

const (
	// Served: the request was served. Its leases go back.
	Served Outcome = iota
	// Failed: the request was served and failed (a 5xx, an upstream that
	// broke off). Its leases go back, and the units of the charges that
	// refund on failure.
	Failed
	// Unserved: the request was charged but will not be served (refused
	// after its decision, or its client left before it was served).
	// Everything goes back but the units of the shadow rules' charges.
	Unserved
)

// A Ledger records what a decision charged one request and gives back,
// once, what each way the request ends requires: Release gives back the
// leases (at the end of the request, or as soon as its client leaves),
// Settle charges a metered estimate at the actual cost, and End gives
// back what the request's Outcome requires. Whatever a call gives back,
// or tries to, is taken out of the ledger, so that no unit goes back
// twice, in any order of calls. The limits given back are those that were
// charged. A Ledger is safe for concurrent use; its methods on a nil
// Ledger do nothing.
type Ledger struct {
	lim     Limiter
	mu      sync.Mutex
	charges []Charge
}

// NewLedger returns the ledger of charges made through lim, or nil if
// there are none. It keeps charges.
func NewLedger(lim Limiter, charges []Charge) *Ledger {
	if len(charges) == 0 {
		return nil
	}
	return &Ledger{lim: lim, charges: charges}
}

// Holds reports whether l holds concurrency leases, units that go back
// when the request fails, or a metered estimate: whether the end of the
// request is worth tracking.
func (l *Ledger) Holds() (leases, refunds, metered bool) {
	if l == nil {
		return false, false, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.charges {
		metered = metered || c.Metered
		if c.Cost == 0 {
			continue
		}
		for _, lim := range c.Limits {
			if lim.Algorithm == Concurrency {
				leases = true
			} else if c.RefundOnFailure {
				refunds = true
			}
		}
	}
	return leases, refunds, metered
}

// Release gives back the request's concurrency leases. ctx bounds the
// store's calls: to release after the client has gone, pass
// context.WithoutCancel. The error joins the store's failures; the rest
// is given back regardless.
func (l *Ledger) Release(ctx context.Context) error {
	return l.give(ctx, func(c Charge, lim Limit) bool { return lim.Algorithm == Concurrency })
}

// End gives back what the request's outcome o requires (see Outcome),
// and empties the ledger: a later call gives back nothing. Its ctx and
// error are Release's.
func (l *Ledger) End(ctx context.Context, o Outcome) error {
	if l == nil {
		return nil
	}
	err := l.give(ctx, func(c Charge, lim Limit) bool {
		switch {
		case lim.Algorithm == Concurrency:
			return true
		case o == Failed:
			return c.RefundOnFailure
		case o == Unserved:
			return !c.Shadow
		}
		return false
	})
	l.mu.Lock()
	l.charges = nil
	l.mu.Unlock()
	return err
}

// give gives back, and takes out of l, the limits of each charge that
// pick selects: one Limiter.Refund per cost, a key at most once in each.
func (l *Ledger) give(ctx context.Context, pick func(Charge, Limit) bool) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var reqs []Request
	kept := l.charges[:0:0]
	for _, c := range l.charges {
		give, keep := split(c.Limits, func(lim Limit) bool { return pick(c, lim) })
		if len(keep) > 0 {
			k := c
			k.Limits = keep
			kept = append(kept, k)
		}
		if len(give) == 0 || c.Cost == 0 {
			continue
		}
		i := slices.IndexFunc(reqs, func(r Request) bool {
			return r.Cost == c.Cost && !slices.ContainsFunc(r.Keys, func(k KeyLimits) bool { return k.Key == c.Key })
		})
		if i < 0 {
			i = len(reqs)
			reqs = append(reqs, Request{Cost: c.Cost})
		}
		reqs[i].Keys = append(reqs[i].Keys, KeyLimits{Key: c.Key, Limits: give})
	}
	l.charges = kept
	var errs []error
	for _, r := range reqs {
		if err := l.lim.Refund(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Settle settles each metered charge at the actual cost of its meter,
// actual(c.Meter), with Settle: the difference is charged, past the
// limits if need be (a debt), or given back. ok false, a negative cost
// or a store's failure leave the estimate charged. The settled cost is
// what a later End gives back. Its ctx and error are Release's.
func (l *Ledger) Settle(ctx context.Context, actual func(meter int) (cost int64, ok bool)) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	kept := l.charges[:0:0]
	for _, c := range l.charges {
		n, ok := int64(0), false
		if c.Metered {
			n, ok = actual(c.Meter)
		}
		// Concurrency leases and shaping limits cannot be charged after
		// the fact: they keep what they were charged.
		settle, keep := split(c.Limits, func(lim Limit) bool { return lim.Algorithm != Concurrency && !lim.Shape })
		if !ok || len(settle) == 0 || n == c.Cost {
			kept = append(kept, c)
			continue
		}
		if len(keep) > 0 {
			k := c
			k.Limits, k.Metered = keep, false
			kept = append(kept, k)
		}
		r := Request{Keys: []KeyLimits{{Key: c.Key, Limits: settle}}, Cost: c.Cost}
		if err := Settle(ctx, l.lim, r, Decision{Allowed: true}, n); err != nil {
			errs = append(errs, err)
			n = c.Cost
		}
		if n > 0 {
			c.Limits, c.Cost, c.Metered = settle, n, false
			kept = append(kept, c)
		}
	}
	l.charges = kept
	return errors.Join(errs...)
}

// split divides ls into the limits in selects and the rest, in order.
func split(ls []Limit, in func(Limit) bool) (picked, rest []Limit) {
	for _, l := range ls {
		if in(l) {
			picked = append(picked, l)
		} else {
			rest = append(rest, l)
		}
	}
	return picked, rest
}
