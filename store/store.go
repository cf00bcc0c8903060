package store

import (
	"context"

	"github.com/bouncerhq/bouncer"
)

// Charger is a Limiter that can charge units without deciding, for a cost
// known only once a request is done: the tokens an LLM used, the bytes a
// download sent. bouncer.Settle charges through it. The stores and the
// hybrid limiter implement it.
type Charger interface {
	bouncer.Limiter
	// Charge takes r.Cost units from every limit of every key in r,
	// whatever the limits hold. What goes past a limit's capacity is a
	// debt: checks are denied until time pays it back
	// (docs/algorithms.md defines each algorithm's debt). Charge never
	// denies; err != nil means the store failed. A Concurrency limit or a
	// shaping leaky bucket cannot be charged after the fact: a request
	// naming one is invalid (bouncer.ErrInvalidRequest), as is a peek.
	Charge(ctx context.Context, r bouncer.Request) error
}

// EachLimiter is a Limiter that decides several independent requests in
// one go, as Check would decide each of them (concurrently, in no
// particular order): a store with round trips makes them together rather
// than one each. bouncer.CheckEach uses it. The Redis store implements it.
type EachLimiter interface {
	bouncer.Limiter
	// CheckEach decides rs[i] into ds[i] and errs[i], for every i; ds and
	// errs are as long as rs.
	CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error)
}

// Resetter is a Limiter that can forget a key's state. bouncer.Reset
// uses it. Both stores implement it.
type Resetter interface {
	bouncer.Limiter
	// Reset makes every limit of every key in r as if it had never been
	// checked; r.Cost and r.Peek are ignored.
	Reset(ctx context.Context, r bouncer.Request) error
}
