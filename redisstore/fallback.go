package redisstore

import (
	"context"

	"github.com/bouncerhq/bouncer"
)

// fallback decides r without Redis, which failed with err: each limit by
// its policy. A limit with StoreErrorDeny denies; the limits with
// StoreErrorLocal are checked, all or nothing, in the local in-memory
// store; StoreErrorAllow limits allow. The decision is marked Degraded.
func (s *Store) fallback(ctx context.Context, r bouncer.Request, err error) (bouncer.Decision, error) {
	s.degraded.Add(1)
	var local []bouncer.KeyLimits
	var deny *bouncer.Limit
	var denyKey string
	for _, k := range r.Keys {
		var ls []bouncer.Limit
		for j := range k.Limits {
			l := &k.Limits[j]
			switch s.policyOf(l) {
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
		return bouncer.Decision{
			Allowed:    false,
			Limit:      deny.Capacity(),
			ResetAfter: deny.Interval(),
			RetryAfter: deny.Interval(),
			Key:        denyKey,
			LimitName:  deny.Name,
			Degraded:   true,
		}, nil
	}
	if len(local) > 0 {
		d, lerr := s.local.Check(ctx, bouncer.Request{Keys: local, Cost: r.Cost})
		if lerr != nil {
			return bouncer.Decision{}, lerr
		}
		d.Degraded = true
		return d, nil
	}
	first := r.Keys[0].Limits[0]
	return bouncer.Decision{
		Allowed:   true,
		Limit:     first.Capacity(),
		Remaining: max(first.Capacity()-r.Cost, 0),
		Key:       r.Keys[0].Key,
		LimitName: first.Name,
		Degraded:  true,
	}, nil
}

func (s *Store) policyOf(l *bouncer.Limit) bouncer.StoreErrorPolicy {
	if l.OnStoreError != bouncer.StoreErrorDefault {
		return l.OnStoreError
	}
	return s.policy
}
