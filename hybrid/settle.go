package hybrid

import (
	"context"
	"errors"
	"fmt"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

var _ store.Charger = (*Limiter)(nil)

// Charge takes r.Cost from every limit of every key in r, past the limits
// if need be; see store.Charger. A debt is global, so every limit,
// whatever its mode, is charged in the shared store directly, and the
// instance drops what it would otherwise decide on alone: a lease pair's
// lease ends (a bucket's unspent units given back, as when a lease ends;
// a window's stay charged), so that its next check asks the shared store,
// which sees the debt; an async pair's view and the pre-throttle are
// charged too, so that the instance admits nothing past the debt before
// its next sync. The shared store must be a store.Charger; its error is
// Charge's.
func (h *Limiter) Charge(ctx context.Context, r bouncer.Request) error {
	if err := store.ValidateCharge(r); err != nil {
		return err
	}
	shared, ok := h.shared.(store.Charger)
	if !ok {
		return fmt.Errorf("hybrid: the shared store %T cannot charge: %w", h.shared, errors.ErrUnsupported)
	}
	if !hasLocal(r) {
		return shared.Charge(ctx, r)
	}
	h.endLeasesOf(ctx, r)
	local := localOnly(r)
	if c, ok := h.local.(store.Charger); ok {
		_ = c.Charge(ctx, local) // an in-memory store fails no valid request
	}
	if view := asyncOnly(local); len(view.Keys) > 0 {
		_ = h.view.Charge(ctx, view)
	}
	return shared.Charge(ctx, r)
}

// endLeasesOf ends the leases of r's lease pairs, giving a bucket's
// unspent units back to the shared store, as endLeases does.
func (h *Limiter) endLeasesOf(ctx context.Context, r bouncer.Request) {
	now := h.now().UnixNano()
	for _, k := range r.Keys {
		for li := range k.Limits {
			l := &k.Limits[li]
			if l.Mode != bouncer.Lease {
				continue
			}
			i := idOf(k.Key, l)
			sh := h.shardOf(&i)
			sh.mu.Lock()
			var back int64
			if e := sh.m[i]; e != nil && e.units > 0 {
				if now < e.until && l.Algorithm.UsesBurst() {
					back = e.units
					h.stats.leasesReturned.Add(1)
				} else {
					h.stats.leasesExpired.Add(1)
				}
				h.stats.unitsParked.Add(-e.units)
				e.units = 0
			}
			sh.mu.Unlock()
			if back > 0 {
				_ = h.shared.Refund(ctx, pairRequest(k.Key, *l, back))
			}
		}
	}
}

// asyncOnly returns r with only its async limits.
func asyncOnly(r bouncer.Request) bouncer.Request {
	out := bouncer.Request{Cost: r.Cost}
	for _, k := range r.Keys {
		var ls []bouncer.Limit
		for _, l := range k.Limits {
			if l.Mode == bouncer.Async {
				ls = append(ls, l)
			}
		}
		if ls != nil {
			out.Keys = append(out.Keys, bouncer.KeyLimits{Key: k.Key, Limits: ls})
		}
	}
	return out
}
