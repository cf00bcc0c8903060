package bouncer

import (
	"context"
	"errors"
	"fmt"
)

// charger is the method of store.Charger, which Settle charges through.
type charger interface {
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
	c, ok := l.(charger)
	if !ok {
		return fmt.Errorf("bouncer: %T cannot charge after the fact: %w", l, errors.ErrUnsupported)
	}
	r.Cost = actual - r.Cost
	return c.Charge(ctx, r)
}
