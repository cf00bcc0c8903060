package edge

import (
	"context"
	"log/slog"
	"time"

	"github.com/bouncerhq/bouncer"
)

// Hold is the life of an admitted request's charges, which every edge
// shares: the wait for a shaping delay, bounded; the leases given back
// when the request ends, or as soon as its client goes away; the units
// reserved for its cost settled once it is served; the units given back
// if the request fails. What was charged, and what goes back for each
// outcome, is its bouncer.Ledger's, which gives back each unit once.
//
// A Hold is used by one request: Wait, then Run (or Release and Done),
// from the request's goroutine. Only the release of leases when the
// client goes away runs on another.
type Hold struct {
	// Leases and Refunds say what the request holds until it ends:
	// concurrency leases, and units given back when it fails; Run
	// watches the client only for Leases. NewHold sets them from the
	// Ledger.
	Leases, Refunds bool

	// Metered says the request reserved an estimate that Settle settles
	// once it is served.
	Metered bool

	ctx    context.Context
	ledger *bouncer.Ledger
	log    *slog.Logger
}

// NewHold returns the Hold of what l records for the request of ctx,
// which is held for delay, its shaping delay, and whose estimate the
// caller settles if meter; nil if there is nothing to wait for, give
// back or settle. It logs the store's failures to give back to log.
func NewHold(ctx context.Context, l *bouncer.Ledger, delay time.Duration, meter bool, log *slog.Logger) *Hold {
	leases, refunds, _ := l.Holds()
	if delay <= 0 && !leases && !refunds && !meter {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	return &Hold{Leases: leases, Refunds: refunds, Metered: meter, ctx: ctx, ledger: l, log: log}
}

// Holds reports whether h has anything to do when the request ends:
// leases to release, units to give back on failure, or an estimate to
// settle. A caller drops a Hold that holds nothing. Safe to call on nil.
func (h *Hold) Holds() bool { return h != nil && (h.Leases || h.Refunds || h.Metered) }

// Wait holds the request for d, its shaping delay, so that it leaves at
// its turn. A delay longer than max is not waited: the request is
// refused, its charges end as bouncer.Unserved, and Wait returns by how
// much d is over max, for its Retry-After. If the client goes away
// meanwhile (ctx is done), its charges end as bouncer.Unserved too, and
// Wait returns ctx's error.
func (h *Hold) Wait(d, max time.Duration) (over time.Duration, err error) {
	if d > max {
		h.end(bouncer.Unserved)
		return d - max, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return 0, nil
	case <-h.ctx.Done():
		h.end(bouncer.Unserved)
		return 0, h.ctx.Err()
	}
}

// Settle settles the request's reservation at its actual cost, actual
// of each meter (bouncer.Ledger.Settle), once: call it when the request
// has been served, before Done, so that a failure gives back what the
// request was charged in the end. Run never settles: a request whose
// edge settles only once serve has returned keeps its estimate if the
// handler panics; the gateway settles from a deferred call, at what was
// delivered. Safe to call on nil.
func (h *Hold) Settle(actual func(meter int) (cost int64, ok bool)) {
	if h == nil || !h.Metered {
		return
	}
	h.Metered = false
	if err := h.ledger.Settle(context.WithoutCancel(h.ctx), actual); err != nil {
		h.log.Warn("settle failed", "err", err)
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

// Release gives back the request's leases: at the end of the request,
// when its client goes away, or when it is refused (the leases of its
// shadow rules). Safe to call on nil.
func (h *Hold) Release() {
	if h == nil {
		return
	}
	if err := h.ledger.Release(context.WithoutCancel(h.ctx)); err != nil {
		h.log.Warn("release failed", "err", err)
	}
}

// Done ends the request: its charges end as bouncer.Failed if failed,
// else as bouncer.Served. Safe to call on nil, more than once, and with
// Release.
func (h *Hold) Done(failed bool) {
	if failed {
		h.end(bouncer.Failed)
	} else {
		h.end(bouncer.Served)
	}
}

// end ends the request's charges as o.
func (h *Hold) end(o bouncer.Outcome) {
	if h == nil {
		return
	}
	h.Leases, h.Refunds, h.Metered = false, false, false
	if err := h.ledger.End(context.WithoutCancel(h.ctx), o); err != nil {
		h.log.Warn("refund failed", "err", err)
	}
}
