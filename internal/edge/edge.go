// Package edge is what the edges share. Hold is the one admission
// lifecycle of the HTTP middleware, the gRPC interceptors and the
// gateway: a request held for a shaping delay, its leases given back when
// it ends or its client goes away, its units when it fails. Set is the
// middleware's and interceptors' rules over a bouncer.Limiter, deciding
// a request of type R all or nothing.
package edge

import (
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
	leases, rest []bouncer.Limit
	values       []header.Values // per limit: what headers report, prepared
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
		if err := validate(i, r.Name, r.Limits, names); err != nil {
			return nil, err
		}
		c := rule[R]{Rule: r}
		c.Limits = append([]bouncer.Limit(nil), r.Limits...)
		for _, l := range c.Limits {
			policy := r.Name
			if len(c.Limits) > 1 {
				policy += "." + l.Name
			}
			c.values = append(c.values, header.ForLimit(policy, l).Prepare())
			if l.Algorithm == bouncer.Concurrency {
				c.leases = append(c.leases, l)
			} else {
				c.rest = append(c.rest, l)
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

func validate(i int, name string, limits []bouncer.Limit, names map[string]bool) error {
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
		for _, o := range limits[:j] {
			if o.Name == l.Name {
				return fmt.Errorf("rule %q: two limits named %q", name, l.Name)
			}
		}
	}
	return nil
}

// charged is one rule's key in a request's check.
type charged[R any] struct {
	rule *rule[R]
	key  string
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

	// Hold, for an admitted request that holds leases or units given
	// back on failure, is what it must give back when it ends; nil when
	// there is nothing.
	Hold *Hold
}

// setHold is a Hold over what a Set charged one request.
type setHold[R any] struct {
	Hold
	set     *Set[R]
	charges []charged[R] // the shadow rules' first: their leases only
	shadow  int          // how many are the shadow rules'
	cost    int64
}

func (s *Set[R]) hold(ctx context.Context, cs []charged[R], shadow int, cost int64) *setHold[R] {
	h := &setHold[R]{set: s, charges: slices.Clone(cs), shadow: shadow, cost: cost}
	h.Init(ctx, h)
	return h
}

// GiveBack gives back p of what the Set charged.
func (h *setHold[R]) GiveBack(ctx context.Context, p Part) {
	s := h.set
	switch p {
	case Leases:
		s.refund(ctx, h.charges, h.cost, leases)
	case Failed:
		s.refund(ctx, h.charges, h.cost, onFailure)
	case Unserved:
		s.refund(ctx, h.charges[:h.shadow], h.cost, leases)
		s.refund(ctx, h.charges[h.shadow:], h.cost, all)
	}
}

// Admit decides req at cost: the shadow rules one by one, then the
// enforcing rules together, all or nothing, holding an allowed request
// for its shaping delay. A nil error and an allowed decision admit the
// request, which must then be served by a.Hold.Run (or end with
// a.Hold.Done) if a.Hold is not nil. err is the limiter's failure, or
// ctx's error if the client went away while held; nothing is held then.
func (s *Set[R]) Admit(ctx context.Context, req R, cost int64) (Admission, error) {
	a := Admission{Decision: bouncer.Decision{Allowed: true}}
	var buf [4]charged[R]
	cs := s.checkShadow(ctx, req, cost, buf[:0])
	// The enforcing rules' charges go after the shadow rules' leases.
	shadow := len(cs)
	for i := range s.enforce {
		c := &s.enforce[i]
		if v, ok := c.Key(req); ok {
			cs = append(cs, charged[R]{c, storekey.Join(c.Name, v)})
		}
	}
	var h *setHold[R]
	if enforce := cs[shadow:]; len(enforce) > 0 {
		d, err := s.lim.Check(ctx, request(make([]bouncer.KeyLimits, 0, len(enforce)), enforce, cost, all))
		if err != nil {
			s.refund(ctx, cs[:shadow], cost, leases)
			return Admission{}, err
		}
		b := binding(enforce, d)
		if s.observe != nil {
			s.observe(req, b.rule.Name, d, false)
		}
		if !d.Allowed {
			cs = cs[:shadow] // charged nothing
		} else if d.Delay > 0 {
			h = s.hold(ctx, cs, shadow, cost)
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
	a.Hold = s.keep(ctx, h, cs, shadow, cost, a.Decision.Allowed)
	return a, nil
}

// keep returns the Hold of an admitted request that holds leases or units
// given back on failure, or nil. A refused request gives back its shadow
// rules' leases now, unless h (its shaping) gave back everything.
func (s *Set[R]) keep(ctx context.Context, h *setHold[R], cs []charged[R], shadow int, cost int64, allowed bool) *Hold {
	if cost == 0 {
		return nil
	}
	if !allowed {
		if h == nil {
			s.refund(ctx, cs[:shadow], cost, leases)
		}
		return nil
	}
	var holdsLeases, refunds bool
	for _, c := range cs {
		holdsLeases = holdsLeases || len(c.rule.leases) > 0
		refunds = refunds || len(onFailure(c.rule)) > 0
	}
	if !holdsLeases && !refunds {
		return nil
	}
	if h == nil {
		h = s.hold(ctx, cs, shadow, cost)
	}
	h.Leases, h.Refunds = holdsLeases, refunds
	return &h.Hold
}

// checkShadow checks each shadow rule on its own, logs and reports its
// denials, and appends to held the charges of those that allowed.
func (s *Set[R]) checkShadow(ctx context.Context, req R, cost int64, held []charged[R]) []charged[R] {
	for i := range s.shadow {
		c := &s.shadow[i]
		v, ok := c.Key(req)
		if !ok {
			continue
		}
		cs := []charged[R]{{c, storekey.Join(c.Name, v)}}
		d, err := s.lim.Check(ctx, request(nil, cs, cost, all))
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
		if len(c.leases) > 0 {
			held = append(held, cs...)
		}
	}
	return held
}

func all[R any](c *rule[R]) []bouncer.Limit    { return c.Limits }
func leases[R any](c *rule[R]) []bouncer.Limit { return c.leases }

// onFailure picks the units a rule gives back when the request fails.
func onFailure[R any](c *rule[R]) []bouncer.Limit {
	if c.RefundOnFailure {
		return c.rest
	}
	return nil
}

// refund gives cost back to the limits pick chooses of each rule in cs.
// It runs even after the client has gone away.
func (s *Set[R]) refund(ctx context.Context, cs []charged[R], cost int64, pick func(*rule[R]) []bouncer.Limit) {
	if cost == 0 || len(cs) == 0 {
		return
	}
	req := request(nil, cs, cost, pick)
	if len(req.Keys) == 0 {
		return
	}
	if err := s.lim.Refund(context.WithoutCancel(ctx), req); err != nil {
		s.log.Warn("refund failed", "err", err)
	}
}

// request is the check (or refund) of cost on the limits pick chooses of
// each rule in cs, its keys appended to keys.
func request[R any](keys []bouncer.KeyLimits, cs []charged[R], cost int64, pick func(*rule[R]) []bouncer.Limit) bouncer.Request {
	for _, c := range cs {
		if ls := pick(c.rule); len(ls) > 0 {
			keys = append(keys, bouncer.KeyLimits{Key: c.key, Limits: ls})
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
