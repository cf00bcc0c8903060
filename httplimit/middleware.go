package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/internal/edge"
	"github.com/bouncerhq/bouncer/internal/recorder"
)

// DefaultMaxDelay is the longest a shaping rule holds a request when
// Options.MaxDelay is 0.
const DefaultMaxDelay = time.Second

// Options tune the middleware. The zero value limits every request at a
// cost of 1 and writes every rate-limit header.
type Options struct {
	// Cost is what a request takes from every rule without Usage (whose
	// cost is its estimate, then its actual cost). Nil charges 1. A cost
	// of 0 charges nothing (the rules are only looked at, for the
	// headers); a negative cost is answered 400.
	Cost func(r *http.Request) int64

	// Exclude says which requests are not limited at all (no check, no
	// headers). Nil excludes none; ExcludePaths, ExcludeMethods and
	// ExcludeIPs build common ones, and AnyOf joins them.
	Exclude func(r *http.Request) bool

	// SkipHeaders are the header families not written (header.IETF,
	// header.XRateLimit); zero writes both. Retry-After is written on
	// every denial regardless.
	SkipHeaders header.Mode

	// DeniedOnly writes the rate-limit headers on denials only, not on
	// allowed responses.
	DeniedOnly bool

	// OnDenied answers a request that a rule refused. Nil writes 429
	// with the headers and a JSON body (problem details when the client
	// asks for application/problem+json): header.WriteDenied.
	OnDenied func(w http.ResponseWriter, r *http.Request, d Denial)

	// OnError answers a request that could not be decided because the
	// limiter failed (a store error its failure policy did not cover).
	// Nil answers 503 with a JSON error and logs the error, but 400
	// invalid_request, logged at debug, for an error wrapping
	// bouncer.ErrInvalidRequest: the request's own fault. Requests whose
	// client went away are not answered.
	OnError func(w http.ResponseWriter, r *http.Request, err error)

	// MaxDelay bounds how long a shaping rule holds a request; one that
	// would wait longer is refused, with a Retry-After of the excess. Zero
	// means DefaultMaxDelay.
	MaxDelay time.Duration

	// Observe, if set, is told every decision of a rule set: the
	// enforcing rules together (rule is the binding one's name), and each
	// shadow rule on its own (shadow true). For metrics.
	Observe func(r *http.Request, rule string, d bouncer.Decision, shadow bool)

	// Logger receives shadow denials and limiter errors. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Denial describes a refused request to Options.OnDenied.
type Denial struct {
	Rule     string // the binding rule's name
	Decision bouncer.Decision
	Values   header.Values // what the headers report
	Mode     header.Mode   // the header families to write
}

// Middleware returns middleware that limits the requests of the handler
// it wraps under rules, charging lim. The rules are checked together,
// all or nothing, in one call to lim; shadow rules in a call of their
// own. It returns an error if a rule is invalid. The middleware is safe
// for concurrent use.
func Middleware(lim bouncer.Limiter, rules []Rule, o Options) (func(http.Handler) http.Handler, error) {
	m := &middleware{o: o, mode: header.All &^ o.SkipHeaders, log: o.Logger}
	if m.log == nil {
		m.log = slog.Default()
	}
	maxDelay := o.MaxDelay
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	rs := make([]edge.Rule[*http.Request], len(rules))
	m.usage = make([]*Usage, len(rules))
	for i, r := range rules {
		rs[i] = edge.Rule[*http.Request]{Name: r.Name, Key: r.Key, Limits: r.Limits, Shadow: r.Shadow, RefundOnFailure: r.RefundOn5xx}
		if u := r.Usage; u != nil {
			m.usage[i] = u
			rs[i].Estimate = estimate(u.Estimate)
		}
	}
	set, err := edge.New(lim, rs, maxDelay, m.log.With("component", "httplimit"), o.Observe)
	if err != nil {
		return nil, fmt.Errorf("httplimit: %w", err)
	}
	m.set = set
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(next, w, r) })
	}, nil
}

type middleware struct {
	set   *edge.Set[*http.Request]
	usage []*Usage // by rule index; nil for a rule without
	o     Options
	mode  header.Mode
	log   *slog.Logger
}

func (m *middleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	if m.o.Exclude != nil && m.o.Exclude(r) {
		next.ServeHTTP(w, r)
		return
	}
	cost := int64(1)
	if m.o.Cost != nil {
		if cost = m.o.Cost(r); cost < 0 {
			writeError(w, http.StatusBadRequest, "invalid_cost", "the request's cost is negative")
			return
		}
	}
	a, err := m.set.Admit(r.Context(), r, cost)
	if err != nil {
		m.fail(w, r, err)
		return
	}
	if a.Limited {
		if a.Decision.Degraded {
			w.Header().Set(header.Degraded, "true")
		}
		if !a.Decision.Allowed {
			if m.o.OnDenied != nil {
				m.o.OnDenied(w, r, Denial{Rule: a.Rule, Decision: a.Decision, Values: a.Values, Mode: m.mode})
			} else {
				header.WriteDenied(w, r, a.Values, m.mode, "rate limit exceeded: "+a.Values.Policy)
			}
			return
		}
		if !m.o.DeniedOnly {
			a.Values.Set(w.Header(), m.mode)
		}
	}
	h := a.Hold
	if h == nil {
		next.ServeHTTP(w, r)
		return
	}
	var sw *recorder.Writer
	if h.Refunds || h.Metered {
		sw = &recorder.Writer{ResponseWriter: w}
		w = sw
	}
	h.Run(func() bool {
		next.ServeHTTP(w, r)
		if h.Metered {
			h.Settle(func(i int) (int64, bool) { return m.actual(i, r, sw) })
		}
		return sw != nil && sw.Status >= 500
	})
}

// estimate is a metered rule's edge.Rule.Estimate: est's, or 1, and an
// error the request's fault.
func estimate(est func(*http.Request) (int64, error)) func(*http.Request) (int64, error) {
	if est == nil {
		return func(*http.Request) (int64, error) { return 1, nil }
	}
	return func(r *http.Request) (int64, error) {
		n, err := est(r)
		if err != nil {
			return 0, fmt.Errorf("%w: estimate: %v", bouncer.ErrInvalidRequest, err)
		}
		return n, nil
	}
}

// actual is what r cost under rule i, from what sw recorded of the
// response; ok false keeps the estimate.
func (m *middleware) actual(i int, r *http.Request, sw *recorder.Writer) (int64, bool) {
	u := m.usage[i]
	if u == nil || u.Actual == nil {
		return 0, false
	}
	status := sw.Status
	if status == 0 {
		status = http.StatusOK
	}
	return u.Actual(r, &Response{Status: status, Header: sw.Header(), Bytes: sw.Bytes})
}

func (m *middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away: nobody to answer
	}
	if m.o.OnError != nil {
		m.o.OnError(w, r, err)
		return
	}
	if errors.Is(err, bouncer.ErrInvalidRequest) {
		// The request's own fault (such as a cost the limits can never
		// hold), not an outage: a 4xx, logged at debug.
		m.log.Debug("httplimit: invalid request", "method", r.Method, "err", err)
		writeError(w, http.StatusBadRequest, "invalid_request", "the request cannot be decided: "+err.Error())
		return
	}
	m.log.Error("httplimit: limiter failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusServiceUnavailable, "limiter_unavailable", "the rate limiter could not decide this request")
}

// writeError answers a JSON error.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{code, message})
}
