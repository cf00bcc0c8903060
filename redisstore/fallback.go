package redisstore

import (
	"context"
	"errors"

	"github.com/bouncerhq/bouncer"
)

// fallback decides r without Redis, which failed with err: each limit by
// its policy. A limit with StoreErrorDeny denies (a peek, always allowed,
// sees it exhausted); the limits with StoreErrorLocal are checked, all or
// nothing, in the local in-memory store; StoreErrorAllow limits allow.
// The decision is marked Degraded. A caller that canceled ctx gets an
// error wrapping context.Canceled instead: nobody waits for its decision,
// which would charge the local store for a request that is not served.
func (s *Store) fallback(ctx context.Context, r bouncer.Request, err error) (bouncer.Decision, error) {
	if errors.Is(ctx.Err(), context.Canceled) {
		return bouncer.Decision{}, wrap(ctx.Err())
	}
	s.degraded.Add(1)
	var local []bouncer.KeyLimits
	var deny *bouncer.Limit
	var denyKey string
	for _, k := range r.Keys {
		var ls []bouncer.Limit
		for j := range k.Limits {
			l := &k.Limits[j]
			policy := s.policy.For(*l)
			if r.Cost > l.Capacity() && policy != bouncer.StoreErrorLocal {
				// Such a check never passes, with or without Redis (the
				// local store says so itself).
				return bouncer.Decision{
					Capacity:   l.Capacity(),
					RetryAfter: bouncer.Never,
					Key:        k.Key,
					LimitName:  l.Name,
					Degraded:   true,
				}, nil
			}
			switch policy {
			case bouncer.StoreErrorDeny:
				if deny == nil {
					deny, denyKey = l, k.Key
				}
			case bouncer.StoreErrorLocal:
				ls = append(ls, *l)
			}
		}
		if len(ls) > 0 {
			local = append(local, bouncer.KeyLimits{Key: k.Key, Limits: ls})
		}
	}
	if deny != nil {
		d := bouncer.Decision{
			Allowed:    false,
			Capacity:   deny.Capacity(),
			ResetAfter: deny.Interval(),
			RetryAfter: deny.Interval(),
			Key:        denyKey,
			LimitName:  deny.Name,
			Degraded:   true,
		}
		if r.Peek {
			// A peek is always allowed: it sees the limit exhausted.
			d.Allowed, d.RetryAfter = true, 0
		}
		return d, nil
	}
	if len(local) > 0 {
		d, lerr := s.local.Check(ctx, bouncer.Request{Keys: local, Cost: r.Cost, Peek: r.Peek})
		if lerr != nil {
			return bouncer.Decision{}, lerr
		}
		d.Degraded = true
		return d, nil
	}
	first := r.Keys[0].Limits[0]
	return bouncer.Decision{
		Allowed:   true,
		Capacity:  first.Capacity(),
		Remaining: max(first.Capacity()-r.Cost, 0),
		Key:       r.Keys[0].Key,
		LimitName: first.Name,
		Degraded:  true,
	}, nil
}
