package edge

import (
	"context"
	"sync"
	"time"
)

// Part is a part of what a decision charged a request, which a Giver
// gives back.
type Part uint8

const (
	// Leases are the concurrency leases the request holds until it ends.
	Leases Part = iota
	// Failed are the units of the rules that give them back when the
	// request fails.
	Failed
	// Unserved is what a request that will not be served gives back:
	// the units its decision charged, and the leases of the rules that
	// only watched it (shadow rules).
	Unserved
)

// A Giver gives back a Part of what a decision charged one request, in
// whatever terms the decision was made: the edges' Set gives back
// through a bouncer.Limiter, the gateway through rules.Engine.Refund. ctx
// is the request's, done if the client went away: the Giver gives back
// regardless, and logs its own failures. A Hold calls it one Part at a
// time, never twice with the same Part.
type Giver interface {
	GiveBack(ctx context.Context, p Part)
}

// A Settler settles what a decision reserved for one request once the
// request has been served and its real cost is known: it charges the
// rest (past the limits: a debt) or gives back what was not used. actual
// is the cost of each metered rule, by its index among the rules the
// edge was given; ok false leaves that rule's estimate charged. A Giver
// that meters implements it; ctx is the request's, and the Settler
// settles regardless of it, and logs its own failures.
type Settler interface {
	Settle(ctx context.Context, actual func(rule int) (cost int64, ok bool))
}

// Hold is the life of an admitted request's charges, which every edge
// shares: the wait for a shaping delay, bounded; the leases given back
// when the request ends, or as soon as its client goes away, and once;
// the units reserved for its cost settled once it is served; the units
// given back if the request fails. What is given back, and how, is its
// Giver's.
//
// A Hold is used by one request: Wait, then Run (or Release and Done),
// from the request's goroutine. Only the release of leases when the
// client goes away runs on another, and the leases are given back once.
type Hold struct {
	// Leases and Refunds say what the request holds until it ends:
	// concurrency leases, and units given back when it fails. Run
	// watches the client only for Leases, and Done gives back on
	// failure only for Refunds.
	Leases, Refunds bool

	// Metered says the request reserved an estimate that Settle settles
	// once it is served; its Giver is then a Settler.
	Metered bool

	ctx   context.Context
	giver Giver
	once  sync.Once // gives back the leases, or everything
}

// Init readies h for the request of ctx, giving back through g. (A Hold
// is a field of its Giver, so that one allocation holds both.)
func (h *Hold) Init(ctx context.Context, g Giver) { h.ctx, h.giver = ctx, g }

// Wait holds the request for d, its shaping delay, so that it leaves at
// its turn. A delay longer than max is not waited: the request is
// refused, everything it was charged is given back (Unserved), and Wait
// returns by how much d is over max, for its Retry-After. If the client
// goes away meanwhile (ctx is done), everything is given back too, and
// Wait returns ctx's error.
func (h *Hold) Wait(d, max time.Duration) (over time.Duration, err error) {
	if d > max {
		h.abandon()
		return d - max, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return 0, nil
	case <-h.ctx.Done():
		h.abandon()
		return 0, h.ctx.Err()
	}
}

// abandon gives back everything the request was charged: it will not be
// served.
func (h *Hold) abandon() {
	h.once.Do(func() { h.giver.GiveBack(h.ctx, Unserved) })
	h.Leases, h.Refunds, h.Metered = false, false, false
}

// Settle settles the request's reservation at its actual cost (see
// Settler), once: call it when the request has been served, before Done,
// so that a failure gives back what the request was charged in the end.
// Run never settles: a request whose edge settles only once serve has
// returned keeps its estimate if the handler panics; the gateway settles
// from a deferred call, at what was delivered. Safe to call on nil.
func (h *Hold) Settle(actual func(rule int) (cost int64, ok bool)) {
	if h == nil || !h.Metered {
		return
	}
	h.Metered = false
	if s, ok := h.giver.(Settler); ok {
		s.Settle(h.ctx, actual)
	}
}

// Run serves the admitted request with serve, which reports whether the
// request failed, and ends the Hold when serve returns or panics (a
// panic is a failure): the leases are given back then, or as soon as the
// client goes away if that is sooner, and, for a failure, the units
// given back on failure. On a nil Hold, Run only serves.
func (h *Hold) Run(serve func() (failed bool)) {
	if h == nil {
		serve()
		return
	}
	if h.Leases {
		// A client that goes away frees its leases at once, even if the
		// handler goes on.
		stop := context.AfterFunc(h.ctx, h.Release)
		defer stop()
	}
	failed := true
	defer func() { h.Done(failed) }()
	failed = serve()
}

// Release gives back the request's leases, once: at the end of the
// request, when its client goes away, or when it is refused (the leases
// of its shadow rules).
func (h *Hold) Release() {
	h.once.Do(func() { h.giver.GiveBack(h.ctx, Leases) })
}

// Done ends the request: it gives back its leases, and, if failed, the
// units of its rules that give them back on failure. Safe to call on
// nil, more than once, and with Release.
func (h *Hold) Done(failed bool) {
	if h == nil {
		return
	}
	h.Release()
	refunds := h.Refunds
	h.Refunds = false // the request has ended: a second Done gives back nothing
	if failed && refunds {
		h.giver.GiveBack(h.ctx, Failed)
	}
}
