package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/bouncerhq/bouncer"
)

// Engine decides requests against the config it holds, charging a
// bouncer.Limiter. It is safe for concurrent use; Swap replaces the config
// atomically, and a request in flight finishes on the config it started
// with.
//
// An Engine is ready however it was made: the zero Engine (or one made
// with a nil config) serves an empty config, in which every domain is
// unknown, until Swap gives it one; NewEngine is shorthand for setting
// Limiter and calling Swap.
type Engine struct {
	// Limiter keeps the counts. With none, a request that a rule limits
	// fails with ErrNoLimiter (as a store failure would), and so do
	// Refund, State and Reset; requests no rule limits are answered.
	Limiter bouncer.Limiter

	// Now reads the clock that envoyproxy/ratelimit semantics compute
	// duration_until_reset from (that project's formula: the unit minus
	// the Unix time modulo the unit). Nil means time.Now.
	Now func() time.Time

	// RejectUnknownDomains makes Decide fail with ErrUnknownDomain for a
	// domain the config does not define. By default such a request is
	// allowed and no descriptor has a limit, as in envoyproxy/ratelimit.
	RejectUnknownDomains bool

	// Keys, if not nil, is told of the keys of every decision: the admin
	// API's key index (admin.KeyIndex) remembers the ones decided most
	// recently, for listing (stores keep no keys, only hashes or digests).
	Keys KeyObserver

	// Concurrent makes the checks of a request's descriptors, under
	// envoyproxy/ratelimit semantics, run at once rather than in turn: for
	// a store with round trips (Redis) a request then waits for one, not
	// one per descriptor. Descriptors with the same key are still checked
	// in order.
	Concurrent bool

	// Observe, if not nil, is called after every Decide with the request's
	// domain ("" when the config does not define it) and its response, or
	// the error that failed it.
	Observe func(domain string, resp *Response, err error)

	// Logger receives what a request does not say in its answer: a
	// domain the config does not define (at Warn, once per domain, for
	// the first MaxLoggedDomains distinct ones, then one line saying it
	// stops), and at Debug a descriptor that carries only the plan entry
	// or whose rule another rule replaced. Nil means slog.Default().
	Logger *slog.Logger

	config  atomic.Pointer[Config]
	unknown unknownDomains
}

// NewEngine returns an engine serving c, counting in lim.
func NewEngine(c *Config, lim bouncer.Limiter) *Engine {
	e := &Engine{Limiter: lim}
	e.Swap(c)
	return e
}

// emptyConfig is the config of an engine that was given none.
var emptyConfig = &Config{}

// Config returns the config being served: never nil.
func (e *Engine) Config() *Config {
	if c := e.config.Load(); c != nil {
		return c
	}
	return emptyConfig
}

// Swap serves c from now on (nil: the empty config) and returns the
// config it replaces, never nil.
func (e *Engine) Swap(c *Config) *Config {
	if old := e.config.Swap(c); old != nil {
		return old
	}
	return emptyConfig
}

// ErrNoLimiter is the error of a check, a refund or a reset on an Engine
// with no Limiter.
var ErrNoLimiter = errors.New("rules: the engine has no Limiter")

// limiter is e.Limiter, or one that fails every call with ErrNoLimiter.
func (e *Engine) limiter() bouncer.Limiter {
	if e.Limiter != nil {
		return e.Limiter
	}
	return noLimiter{}
}

type noLimiter struct{}

func (noLimiter) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{}, ErrNoLimiter
}

func (noLimiter) Refund(context.Context, bouncer.Request) error { return ErrNoLimiter }

func (noLimiter) Reset(context.Context, bouncer.Request) error { return ErrNoLimiter }

// Decide answers r. A non-nil error wraps bouncer.ErrInvalidRequest or
// ErrUnknownDomain, or is the store's failure; nothing is decided then,
// and no lease is held (leases taken before the failure are released). A
// caller that can hold requests waits Response.Delay before it proceeds;
// one that learns how requests end gives units back with the response's
// Ledger.
func (e *Engine) Decide(ctx context.Context, r Request) (Response, error) {
	resp, d, err := e.decide(ctx, r)
	if e.Observe != nil {
		domain := "" // a domain the config lacks is no label value: clients choose it
		if d != nil {
			domain = d.Name
		}
		e.Observe(domain, &resp, err)
	}
	return resp, err
}

// decide answers r, and returns the domain of the config it used (nil if
// the config does not define r's).
func (e *Engine) decide(ctx context.Context, r Request) (Response, *Domain, error) {
	d := e.Config().Domain(r.Domain)
	if err := r.validate(); err != nil {
		return Response{}, d, err
	}
	resp := Response{Code: OK, Statuses: make([]Status, len(r.Descriptors)), Binding: -1, domain: d}
	for i := range resp.Statuses {
		resp.Statuses[i].Code = OK
		resp.Statuses[i].Hits = uint64(r.hits(i))
	}
	if d == nil {
		e.unknownDomain(ctx, r.Domain)
		if e.RejectUnknownDomains {
			return Response{}, nil, fmt.Errorf("%w: %q", ErrUnknownDomain, r.Domain)
		}
		return resp, nil, nil
	}
	if err := d.checkOverrides(&r); err != nil {
		return Response{}, d, err
	}
	ms, replaced := d.matchAll(&r)
	if d.custom {
		e.custom(ctx, ms)
	}
	if e.Keys != nil {
		e.observe(d.Name, ms, e.now())
	}
	if log := e.logger(); log.Enabled(ctx, slog.LevelDebug) {
		d.explain(ctx, log, &r, ms, replaced)
	}
	var err error
	if d.Semantics == EnvoySemantics {
		err = e.decideEach(ctx, d, ms, &resp)
	} else {
		err = e.decideTogether(ctx, ms, &resp)
	}
	if err != nil {
		return Response{}, d, errors.Join(err, bouncer.NewLedger(e.limiter(), resp.charges).Release(context.WithoutCancel(ctx)))
	}
	resp.lim = e.limiter()
	for i, rp := range replaced {
		if rp.rule != nil {
			resp.Statuses[i].Rule = rp.rule // and no Limit: see Status.Replaced
		}
	}
	if e.Keys != nil {
		e.observeDenied(&resp)
	}
	resp.finish()
	return resp, d, nil
}

func (e *Engine) logger() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.Default()
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}
