// Package edge is what the edges share. Hold is the one admission
// lifecycle of the HTTP middleware, the gRPC interceptors and the
// gateway: a request held for a shaping delay, its leases given back when
// it ends or its client goes away, its units when it fails. Set is the
// middleware's and interceptors' rules over a bouncer.Limiter, deciding
// a request of type R all or nothing, and settling the rules that meter
// a cost known only once the request is served.
package edge

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/internal/storekey"
)

// Rule is one rule of a Set; the edges document its fields.
type Rule[R any] struct {
	Name            string
	Key             func(R) (string, bool) // nil: one key for every request
	Limits          []bouncer.Limit
	Shadow          bool
	RefundOnFailure bool

	// Estimate, if not nil, meters the rule: a request reserves what it
	// returns, at least 1 (so that a client in debt is refused whatever
	// it claims), instead of the request's cost, and Hold.Settle settles
	// it at the actual cost. An error refuses the request; it should
	// wrap bouncer.ErrInvalidRequest, the client's fault.
	Estimate func(R) (int64, error)
}

// Set decides requests of type R under its rules.
type Set[R any] struct {
	lim             bouncer.Limiter
	enforce, shadow []rule[R]
	maxDelay        time.Duration
	log             *slog.Logger
	observe         func(R, string, bouncer.Decision, bool)
}

type rule[R any] struct {
	Rule[R]
	index  int // among the rules given to New: its charges' Meter
	leases []bouncer.Limit
	values []header.Values // per limit: what headers report, prepared
}

// New validates rules and returns their set. A shaping delay longer than
// maxDelay refuses the request; observe, if not nil, is told each
// decision.
func New[R any](lim bouncer.Limiter, rules []Rule[R], maxDelay time.Duration, log *slog.Logger, observe func(R, string, bouncer.Decision, bool)) (*Set[R], error) {
	if lim == nil {
		return nil, fmt.Errorf("no limiter")
	}
	s := &Set[R]{lim: lim, maxDelay: maxDelay, log: log, observe: observe}
	names := map[string]bool{}
	for i, r := range rules {
		if err := validate(i, r.Name, r.Limits, r.Estimate != nil, names); err != nil {
			return nil, err
		}
		c := rule[R]{Rule: r, index: i}
		c.Limits = append([]bouncer.Limit(nil), r.Limits...)
		for _, l := range c.Limits {
			policy := r.Name
			if len(c.Limits) > 1 {
				policy += "." + l.Name
			}
			c.values = append(c.values, header.ForLimit(policy, l).Prepare())
			if l.Algorithm == bouncer.Concurrency {
				c.leases = append(c.leases, l)
			}
		}
		if c.Key == nil {
			c.Key = func(R) (string, bool) { return "", true }
		}
		if r.Shadow {
			s.shadow = append(s.shadow, c)
		} else {
			s.enforce = append(s.enforce, c)
		}
	}
	return s, nil
}

func validate(i int, name string, limits []bouncer.Limit, metered bool, names map[string]bool) error {
	switch {
	case name == "":
		return fmt.Errorf("rule %d: name is empty", i)
	case names[name]:
		return fmt.Errorf("rule %d: a second rule named %q", i, name)
	case len(limits) == 0:
		return fmt.Errorf("rule %q: no limits", name)
	}
	names[name] = true
	for j, l := range limits {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("rule %q: %w", name, err)
		}
		if metered && (l.Algorithm == bouncer.Concurrency || l.Shape) {
			return fmt.Errorf("rule %q: limit %q: a rule that meters a cost known after the response cannot hold concurrency leases or shape: its charge is settled after the fact", name, l.Name)
		}
		for _, o := range limits[:j] {
			if o.Name == l.Name {
				return fmt.Errorf("rule %q: two limits named %q", name, l.Name)
			}
		}
	}
	return nil
}

// charged is one rule's key in a request's check, at the rule's cost.
type charged[R any] struct {
	rule *rule[R]
	key  string
	cost int64
}

// cost is what req reserves of c: its estimate if c meters, else cost.
func (c *rule[R]) cost(req R, cost int64) (int64, error) {
	if c.Estimate == nil {
		return cost, nil
	}
	n, err := c.Estimate(req)
	if err != nil {
		return 0, fmt.Errorf("rule %q: %w", c.Name, err)
	}
	return max(n, 1), nil
}

// Admission is a decided request.
type Admission struct {
	// Decision is the enforcing rules' decision; Rule names the binding
	// rule and Values what headers report. Limited is false when no
	// enforcing rule applied to the request: there is nothing to report.
	Decision bouncer.Decision
	Rule     string
	Values   header.Values
	Limited  bool

	// Hold, for an admitted request that holds leases, units given back
	// on failure or a reservation to settle, is what it must give back
	// or settle when it ends; nil when there is nothing.
	Hold *Hold
}

// ledger is the Ledger of cs, the first shadow of them the shadow
// rules'.
func (s *Set[R]) ledger(cs []charged[R], shadow int) *bouncer.Ledger {
	charges := make([]bouncer.Charge, len(cs))
	for i, c := range cs {
		charges[i] = bouncer.Charge{
			Key: c.key, Limits: c.rule.Limits, Cost: c.cost,
			RefundOnFailure: c.rule.RefundOnFailure, Shadow: i < shadow,
			Metered: c.rule.Estimate != nil, Meter: c.rule.index,
		}
	}
	return bouncer.NewLedger(s.lim, charges)
}

// release gives back the leases of cs, the shadow rules' charges of a
// request that will not be admitted.
func (s *Set[R]) release(ctx context.Context, cs []charged[R]) {
	if err := s.ledger(cs, len(cs)).Release(context.WithoutCancel(ctx)); err != nil {
		s.log.Warn("refund failed", "err", err)
	}
}

// Admit decides req at cost (a metered rule's at its estimate): the
// shadow rules one by one, then the enforcing rules together, all or
// nothing, holding an allowed request for its shaping delay. A nil error
// and an allowed decision admit the request, which must then be served
// by a.Hold.Run (or end with a.Hold.Done) if a.Hold is not nil. err is
// the limiter's failure, an estimate's error, or ctx's error if the
// client went away while held; nothing is held then.
func (s *Set[R]) Admit(ctx context.Context, req R, cost int64) (Admission, error) {
	a := Admission{Decision: bouncer.Decision{Allowed: true}}
	var buf [4]charged[R]
	cs, err := s.checkShadow(ctx, req, cost, buf[:0])
	if err != nil {
		return Admission{}, err
	}
	// The enforcing rules' charges go after the shadow rules' leases.
	shadow := len(cs)
	for i := range s.enforce {
		c := &s.enforce[i]
		if v, ok := c.Key(req); ok {
			n, err := c.cost(req, cost)
			if err != nil {
				s.release(ctx, cs[:shadow])
				return Admission{}, err
			}
			cs = append(cs, charged[R]{c, storekey.Join(c.Name, v), n})
		}
	}
	var h *Hold
	if enforce := cs[shadow:]; len(enforce) > 0 {
		d, b, err := s.check(ctx, enforce)
		if err != nil {
			s.release(ctx, cs[:shadow])
			return Admission{}, err
		}
		if s.observe != nil {
			s.observe(req, b.rule.Name, d, false)
		}
		if !d.Allowed {
			cs = cs[:shadow] // charged nothing
		} else if d.Delay > 0 {
			h = NewHold(ctx, s.ledger(cs, shadow), d.Delay, metered(cs), s.log)
			over, err := h.Wait(d.Delay, s.maxDelay)
			if err != nil {
				return Admission{}, err
			}
			if over > 0 {
				d.Allowed, d.RetryAfter, d.Delay = false, over, 0
			}
		}
		a.Decision, a.Rule, a.Values, a.Limited = d, b.rule.Name, values(b, d), true
	}
	a.Hold = s.keep(ctx, h, cs, shadow, a.Decision.Allowed)
	return a, nil
}

// check decides cs all or nothing and returns the decision and its
// binding charge. Charges of one cost are one check; when metered rules
// make several costs, each cost is checked in turn, and a denial (or a
// failure) refunds the costs checked before it.
func (s *Set[R]) check(ctx context.Context, cs []charged[R]) (bouncer.Decision, charged[R], error) {
	if slices.ContainsFunc(cs, func(c charged[R]) bool { return c.cost != cs[0].cost }) {
		slices.SortStableFunc(cs, func(a, b charged[R]) int { return cmp.Compare(a.cost, b.cost) })
	}
	var d bouncer.Decision
	var b charged[R]
	for i := 0; i < len(cs); {
		j := i + 1
		for j < len(cs) && cs[j].cost == cs[i].cost {
			j++
		}
		g, err := s.lim.Check(ctx, request(make([]bouncer.KeyLimits, 0, j-i), cs[i:j], all))
		if err != nil || !g.Allowed {
			if err := s.ledger(cs[:i], 0).End(context.WithoutCancel(ctx), bouncer.Unserved); err != nil {
				s.log.Warn("refund failed", "err", err)
			}
			return g, binding(cs[i:j], g), err
		}
		if i == 0 || binds(g, d) {
			delay := max(d.Delay, g.Delay)
			d, b = g, binding(cs[i:j], g)
			d.Delay = delay
		} else {
			d.Delay = max(d.Delay, g.Delay)
		}
		d.Degraded = d.Degraded || g.Degraded
		i = j
	}
	return d, b, nil
}

// binds reports whether g's binding limit binds rather than d's, both
// allowed: the least remaining, then the longer retry, then the longer
// reset (bouncer.Decision).
func binds(g, d bouncer.Decision) bool {
	if g.Remaining != d.Remaining {
		return g.Remaining < d.Remaining
	}
	if g.RetryAfter != d.RetryAfter {
		return g.RetryAfter > d.RetryAfter
	}
	return g.ResetAfter > d.ResetAfter
}

// keep returns the Hold of an admitted request that holds leases, units
// given back on failure or a reservation to settle, or nil. A refused
// request gives back its shadow rules' leases now, unless h (its
// shaping) gave back everything.
func (s *Set[R]) keep(ctx context.Context, h *Hold, cs []charged[R], shadow int, allowed bool) *Hold {
	if !allowed {
		if h == nil {
			s.release(ctx, cs[:shadow])
		}
		return nil
	}
	if h == nil {
		return NewHold(ctx, s.ledger(cs, shadow), 0, metered(cs), s.log)
	}
	if !h.Holds() {
		return nil
	}
	return h
}

// metered reports whether a rule of cs meters its cost.
func metered[R any](cs []charged[R]) bool {
	return slices.ContainsFunc(cs, func(c charged[R]) bool { return c.rule.Estimate != nil })
}

// checkShadow checks each shadow rule on its own, logs and reports its
// denials, and appends to held the charges of those that allowed and
// hold leases or meter. Its error is an estimate's.
func (s *Set[R]) checkShadow(ctx context.Context, req R, cost int64, held []charged[R]) ([]charged[R], error) {
	for i := range s.shadow {
		c := &s.shadow[i]
		v, ok := c.Key(req)
		if !ok {
			continue
		}
		n, err := c.cost(req, cost)
		if err != nil {
			s.release(ctx, held)
			return nil, err
		}
		cs := []charged[R]{{c, storekey.Join(c.Name, v), n}}
		d, err := s.lim.Check(ctx, request(nil, cs, all))
		if err != nil {
			s.log.Warn("shadow rule not decided", "rule", c.Name, "err", err)
			continue
		}
		if s.observe != nil {
			s.observe(req, c.Name, d, true)
		}
		if !d.Allowed {
			s.log.Info("shadow rule would deny", "rule", c.Name, "key", cs[0].key, "limit", d.LimitName, "retry_after", d.RetryAfter)
			continue
		}
		if len(c.leases) > 0 || c.Estimate != nil {
			held = append(held, cs...)
		}
	}
	return held, nil
}

func all[R any](c *rule[R]) []bouncer.Limit { return c.Limits }

// request is the check (or refund) of the limits pick chooses of each
// rule in cs, which are charged one cost, its keys appended to keys.
func request[R any](keys []bouncer.KeyLimits, cs []charged[R], pick func(*rule[R]) []bouncer.Limit) bouncer.Request {
	var cost int64
	for _, c := range cs {
		if ls := pick(c.rule); len(ls) > 0 {
			keys = append(keys, bouncer.KeyLimits{Key: c.key, Limits: ls})
			cost = c.cost
		}
	}
	return bouncer.Request{Keys: keys, Cost: cost, Peek: cost == 0}
}

// binding returns the charge of d's binding limit.
func binding[R any](cs []charged[R], d bouncer.Decision) charged[R] {
	for _, c := range cs {
		if c.key == d.Key {
			return c
		}
	}
	return cs[0]
}

// values are the header values of d, whose binding limit is one of b's:
// the policy is the rule's name, and the limit's after a dot when the
// rule has several.
func values[R any](b charged[R], d bouncer.Decision) header.Values {
	for i, l := range b.rule.Limits {
		if l.Name == d.LimitName {
			return b.rule.values[i].Decided(d)
		}
	}
	return b.rule.values[0].Decided(d)
}
