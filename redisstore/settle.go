package redisstore

import (
	"context"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// flagCharge marks a part that is a charge (see lua/check.lua): charges
// travel as checks, so that they are batched with them.
const flagCharge byte = 2

var _ store.Charger = (*Store)(nil)

// Charge takes r.Cost from every limit of every key in r, past the limits
// if need be; see store.Charger. A charge is one script call (on a
// Cluster, one per group of its keys, in turn), batched in its lane with
// checks, on Redis's clock. A charge decides nothing, so no policy can
// decide it without Redis: when Redis cannot answer, Charge returns the
// error — the charge is lost to the shared limits — and charges the
// limits whose StoreErrorPolicy is StoreErrorLocal in the local store,
// so that the checks it decides meanwhile see the debt. On a Cluster, a
// call that fails leaves the groups charged before it charged.
func (s *Store) Charge(ctx context.Context, r bouncer.Request) error {
	if err := store.ValidateCharge(r); err != nil {
		return err
	}
	if !s.ready.Load() {
		if err := s.validate(r); err != nil {
			return err
		}
		return s.chargeLocal(ctx, r, s.errConnecting())
	}
	ps, err := s.plan(r)
	if err != nil {
		return err
	}
	for i := range ps {
		ps[i].flag = flagCharge
		if _, err := s.send(ctx, &ps[i]); err != nil {
			return s.chargeLocal(ctx, r, err)
		}
	}
	return nil
}

// chargeLocal charges r's limits with StoreErrorLocal in the local store
// after Redis failed with err, and returns err.
func (s *Store) chargeLocal(ctx context.Context, r bouncer.Request, err error) error {
	c, ok := s.local.(store.Charger)
	if !ok {
		return err
	}
	var local []bouncer.KeyLimits
	for _, k := range r.Keys {
		var ls []bouncer.Limit
		for j := range k.Limits {
			if s.policy.For(k.Limits[j]) == bouncer.StoreErrorLocal {
				ls = append(ls, k.Limits[j])
			}
		}
		if len(ls) > 0 {
			local = append(local, bouncer.KeyLimits{Key: k.Key, Limits: ls})
		}
	}
	if len(local) > 0 {
		// The local store never fails a valid request.
		_ = c.Charge(context.WithoutCancel(ctx), bouncer.Request{Keys: local, Cost: r.Cost})
	}
	return err
}
