package storetest_test

import (
	"context"
	"sync"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/store"
)

// naiveStore is a test double: the simplest store over package algo, one
// map under one mutex, so that the suite can be checked without a real
// store. It decides in two phases: every limit's result first, then the
// new states only if all allowed (or, for limits with ChargeDenied,
// whether or not all allowed).
type naiveStore struct {
	now    func() int64
	mu     sync.Mutex
	states map[naiveKey]algo.State
}

type naiveKey struct {
	key   string
	limit bouncer.Limit
}

var _ bouncer.Limiter = (*naiveStore)(nil)

func newNaiveStore(now func() int64) *naiveStore {
	return &naiveStore{now: now, states: map[naiveKey]algo.State{}}
}

type naiveResult struct {
	k     naiveKey
	state algo.State
	res   algo.Result
}

func (s *naiveStore) Check(_ context.Context, r bouncer.Request) (bouncer.Decision, error) {
	if err := store.Validate(r); err != nil {
		return bouncer.Decision{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var results []naiveResult
	allowed := true
	for _, kl := range r.Keys {
		for _, l := range kl.Limits {
			k := naiveKey{kl.Key, l}
			state, res := algo.Check(l, s.states[k], now, r.Cost)
			allowed = allowed && res.Allowed
			results = append(results, naiveResult{k, state, res})
		}
	}
	for i := range results {
		x := &results[i]
		if !allowed && x.res.Allowed {
			// Report the limit as it stood before the check, charged or
			// not, so that only a denying limit binds.
			_, x.res = algo.Check(x.k.limit, s.states[x.k], now, 0)
		}
		if allowed || x.k.limit.ChargeDenied {
			s.states[x.k] = x.state
		}
	}
	return naiveDecision(results, allowed), nil
}

// naiveDecision picks the binding limit as bouncer.Decision documents it.
func naiveDecision(results []naiveResult, allowed bool) bouncer.Decision {
	b := results[0]
	d := bouncer.Decision{Allowed: allowed}
	for _, x := range results {
		d.RetryAfter = max(d.RetryAfter, x.res.RetryAfter)
		d.Delay = max(d.Delay, x.res.Delay)
		if less(x.res, b.res) {
			b = x
		}
	}
	d.Capacity = b.k.limit.Capacity()
	d.Remaining = b.res.Remaining
	d.ResetAfter = b.res.ResetAfter
	d.Key, d.LimitName = b.k.key, b.k.limit.Name
	return d
}

// less reports whether x binds before y: less remaining, then longer
// retry, then longer reset.
func less(x, y algo.Result) bool {
	if x.Remaining != y.Remaining {
		return x.Remaining < y.Remaining
	}
	if x.RetryAfter != y.RetryAfter {
		return x.RetryAfter > y.RetryAfter
	}
	return x.ResetAfter > y.ResetAfter
}

func (s *naiveStore) Refund(_ context.Context, r bouncer.Request) error {
	if err := store.Validate(r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, kl := range r.Keys {
		for _, l := range kl.Limits {
			k := naiveKey{kl.Key, l}
			s.states[k] = algo.Refund(l, s.states[k], now, r.Cost)
		}
	}
	return nil
}

var _ store.Charger = (*naiveStore)(nil)

func (s *naiveStore) Charge(_ context.Context, r bouncer.Request) error {
	if err := store.ValidateCharge(r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, kl := range r.Keys {
		for _, l := range kl.Limits {
			k := naiveKey{kl.Key, l}
			s.states[k] = algo.Charge(l, s.states[k], now, r.Cost)
		}
	}
	return nil
}
