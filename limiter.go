package bouncer

import (
	"context"
	"errors"
	"fmt"
)

// Limiter decides checks and takes refunds. Every store implements it and
// passes the conformance suite in package storetest. Implementations are
// safe for concurrent use.
type Limiter interface {
	// Check charges r.Cost to every limit of every key in r if all of them
	// allow it, and otherwise charges only the limits with ChargeDenied
	// (nothing, for limits without it). A denied check returns a
	// Decision with Allowed false and a nil error; err != nil means the
	// store failed, and then nothing is known to be charged.
	Check(ctx context.Context, r Request) (Decision, error)

	// Refund gives r.Cost units back to every limit of every key in r. A
	// refund never raises a limit above its capacity. For Concurrency it
	// releases leases, oldest first.
	Refund(ctx context.Context, r Request) error
}

// resetter is the method of store.Resetter, which Reset calls.
type resetter interface {
	Reset(ctx context.Context, r Request) error
}

// Reset forgets the state of every limit of every key in r with l's
// Reset, or returns an error wrapping errors.ErrUnsupported if l is not a
// store.Resetter.
func Reset(ctx context.Context, l Limiter, r Request) error {
	if rs, ok := l.(resetter); ok {
		return rs.Reset(ctx, r)
	}
	return fmt.Errorf("bouncer: %T cannot reset keys: %w", l, errors.ErrUnsupported)
}

// Request is one check: Cost units for every key in Keys.
type Request struct {
	Keys []KeyLimits
	// Cost is how many units the check takes: at least 1, or 0 for a peek.
	// A check of Cost 0 without Peek is an invalid request, so that a
	// Request whose Cost was forgotten fails loudly instead of being
	// allowed forever.
	Cost int64
	// Peek makes the check charge nothing and report the state, with Cost
	// 0: it is allowed unless a ChargeDenied limit is already over
	// (counted past its capacity by denied checks) or a limit is in debt
	// (charged past its capacity: store.Charger).
	Peek bool
}

// KeyLimits is one key and the limits it is checked under.
type KeyLimits struct {
	// Key identifies whose state is charged, such as "user:42". Stores
	// treat it as opaque bytes.
	Key    string
	Limits []Limit
}
