package bouncer

import (
	"context"
	"errors"
	"fmt"
)

// Charger is a Limiter that can charge units without deciding, for a
// cost known only once a request is done: the tokens an LLM used, the
// bytes a download sent. The stores and the hybrid limiter implement it.
type Charger interface {
	Limiter
	// Charge takes r.Cost units from every limit of every key in r,
	// whatever the limits hold. What goes past a limit's capacity is a
	// debt: checks are denied until time pays it back
	// (docs/algorithms.md defines each algorithm's debt). Charge never
	// denies; err != nil means the store failed. A Concurrency limit or a
	// shaping leaky bucket cannot be charged after the fact: a request
	// naming one is invalid (ErrInvalidRequest), as is a peek.
	Charge(ctx context.Context, r Request) error
}

// ErrNotReserved is returned by Settle for a reservation whose check was
// denied: it charged nothing, so there is nothing to settle.
var ErrNotReserved = errors.New("bouncer: the check was denied: nothing was reserved")

// Settle settles a reservation once its real cost is known. r is the
// request whose check reserved r.Cost units (the estimate) and d that
// check's decision; actual is what the request turned out to cost.
// Settle charges the difference through l's Charge when actual is more
// (past the limits if need be: a debt), and gives it back through
// Refund when actual is less. A denied reservation returns ErrNotReserved;
// a limiter that cannot Charge returns an error wrapping
// errors.ErrUnsupported when actual is more than the estimate.
func Settle(ctx context.Context, l Limiter, r Request, d Decision, actual int64) error {
	switch {
	case !d.Allowed:
		return ErrNotReserved
	case actual < 0:
		return fmt.Errorf("%w: actual cost %d is negative", ErrInvalidRequest, actual)
	case r.Peek:
		return fmt.Errorf("%w: a peek reserves nothing", ErrInvalidRequest)
	case actual == r.Cost:
		return nil
	case actual < r.Cost:
		r.Cost -= actual
		return l.Refund(ctx, r)
	}
	c, ok := l.(Charger)
	if !ok {
		return fmt.Errorf("bouncer: %T cannot charge after the fact: %w", l, errors.ErrUnsupported)
	}
	r.Cost = actual - r.Cost
	return c.Charge(ctx, r)
}

// Chargeable reports whether l can be charged after the fact (Charger):
// every algorithm but Concurrency, whose units are leases held while a
// request runs, and a shaping LeakyBucket, whose Delay is decided before
// the request.
func (l Limit) Chargeable() bool {
	return l.Algorithm.Valid() && l.Algorithm != Concurrency && !(l.Algorithm == LeakyBucket && l.Shape)
}

// ValidateCharge reports an error wrapping ErrInvalidRequest or
// ErrInvalidLimit if a store cannot Charge r: r is invalid (Validate), a
// peek, or names a limit that is not Chargeable.
func (r Request) ValidateCharge() error {
	if r.Peek {
		return fmt.Errorf("%w: a peek charges nothing: a charge takes Cost units", ErrInvalidRequest)
	}
	if err := r.Validate(); err != nil {
		return err
	}
	for _, k := range r.Keys {
		for _, l := range k.Limits {
			if !l.Chargeable() {
				return fmt.Errorf("%w: key %q, limit %q: a %s cannot be charged after the fact", ErrInvalidRequest, k.Key, l.Name, chargeName(l))
			}
		}
	}
	return nil
}

func chargeName(l Limit) string {
	if l.Algorithm == LeakyBucket {
		return "shaping leaky_bucket"
	}
	return l.Algorithm.String()
}
