// Package metrics exports Bouncer's Prometheus metrics: decisions by rule
// and result, near-limit answers, store call latency, the Redis breaker's
// state and config reloads. See docs/observing.md for the list.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/store"
)

// NearLimitRatio is the share of a limit used past which an allowed answer
// counts as near the limit (as envoyproxy/ratelimit's NEAR_LIMIT_RATIO).
const NearLimitRatio = 0.8

// Metrics holds the collectors. Its methods are safe for concurrent use.
type Metrics struct {
	decisions *prometheus.CounterVec
	nearLimit *prometheus.CounterVec
	degDenied *prometheus.CounterVec
	errors    *prometheus.CounterVec
	storeTime *prometheus.HistogramVec
	reloads   *prometheus.CounterVec
	version   *prometheus.GaugeVec
	unknown   prometheus.Counter
	limits    *prometheus.CounterVec
}

// New registers Bouncer's collectors on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bouncer_decisions_total",
			Help: "Descriptors decided, by domain, rule (its name; its descriptor path if it has none) and result: ok, over_limit, shadowed (over, answered OK by a shadow rule), unlimited, degraded (decided by the store failure policy), replaced (its rule replaced by another rule of the request) or no_rule.",
		}, []string{"domain", "rule", "result"}),
		nearLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bouncer_near_limit_total",
			Help: "Allowed descriptors that used more than 80% of their limit, by domain and rule.",
		}, []string{"domain", "rule"}),
		degDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bouncer_degraded_denied_total",
			Help: "Degraded descriptors (result degraded) that were denied, by domain and rule: the rest of result degraded was allowed.",
		}, []string{"domain", "rule"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bouncer_request_errors_total",
			Help: "Requests not decided, by reason: invalid_request, unknown_domain or store.",
		}, []string{"reason"}),
		storeTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bouncer_store_check_seconds",
			Help:    "Latency of store checks, by outcome (ok or error).",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1},
		}, []string{"outcome"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bouncer_config_reloads_total",
			Help: "Config reload attempts by result: success, unchanged or failure (the old config kept serving).",
		}, []string{"result"}),
		version: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bouncer_config_info",
			Help: "1 for the config version being served.",
		}, []string{"version"}),
		// No domain label: an unknown domain is the client's choice, and
		// one series each would let clients grow the metrics without
		// bound. The engine's log names them (rules.Engine.Logger).
		unknown: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bouncer_unknown_domain_requests_total",
			Help: "Requests for a domain the config does not define: answered OK with no limit, or rejected as unknown_domain with --unknown-domain error.",
		}),
		limits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bouncer_runtime_limits_changes_total",
			Help: "Changes of keys' runtime limits through the admin API, by domain, rule and action: set or delete (each also logged, with who, when, old and new).",
		}, []string{"domain", "rule", "action"}),
	}
	reg.MustRegister(m.decisions, m.nearLimit, m.degDenied, m.errors, m.storeTime, m.reloads, m.version, m.unknown, m.limits)
	return m
}

// LimitsChanged counts one change of a key's runtime limits.
func (m *Metrics) LimitsChanged(domain, rule, action string) {
	m.limits.WithLabelValues(domain, rule, action).Inc()
}

// Observe counts one Decide; it is an Engine's Observe.
func (m *Metrics) Observe(domain string, resp *rules.Response, err error) {
	if domain == "" && (err == nil || errors.Is(err, rules.ErrUnknownDomain)) {
		m.unknown.Inc() // "" is every domain the config lacks; see rules.Engine.Observe
	}
	if err != nil {
		reason := "store"
		switch {
		case errors.Is(err, bouncer.ErrInvalidRequest):
			reason = "invalid_request"
		case errors.Is(err, rules.ErrUnknownDomain):
			reason = "unknown_domain"
		}
		m.errors.WithLabelValues(reason).Inc()
		return
	}
	for i := range resp.Statuses {
		st := &resp.Statuses[i]
		rule := ""
		if st.Rule != nil {
			rule = st.Rule.Label()
		}
		result := "ok"
		switch {
		case st.Rule == nil && st.Limit == nil && !st.Unlimited:
			result = "no_rule"
		case st.Unlimited:
			result = "unlimited"
		case st.Replaced():
			result = "replaced"
		case st.Degraded:
			result = "degraded"
		case st.Shadowed:
			result = "shadowed"
		case st.Code == rules.OverLimit:
			result = "over_limit"
		}
		m.decisions.WithLabelValues(domain, rule, result).Inc()
		if result == "degraded" && st.Code == rules.OverLimit {
			m.degDenied.WithLabelValues(domain, rule).Inc()
		}
		if result == "ok" && st.Limit != nil && st.Limit.RequestsPerUnit > 0 &&
			float64(st.Remaining) < (1-NearLimitRatio)*float64(st.Limit.RequestsPerUnit) {
			m.nearLimit.WithLabelValues(domain, rule).Inc()
		}
	}
}

// Reloaded counts one reload attempt; it is a Reloader's OnReload.
func (m *Metrics) Reloaded(c *rules.Config, changed bool, err error) {
	switch {
	case err != nil:
		m.reloads.WithLabelValues("failure").Inc()
	case changed:
		m.reloads.WithLabelValues("success").Inc()
	default:
		m.reloads.WithLabelValues("unchanged").Inc()
	}
	m.Serving(c)
}

// Serving records c as the config being served.
func (m *Metrics) Serving(c *rules.Config) {
	m.version.Reset()
	m.version.WithLabelValues(c.Version).Set(1)
}

// Limiter returns next, timing every Check into the store latency
// histogram.
func (m *Metrics) Limiter(next bouncer.Limiter) bouncer.Limiter {
	return &timed{next: next, ok: m.storeTime.WithLabelValues("ok"), failed: m.storeTime.WithLabelValues("error")}
}

type timed struct {
	next       bouncer.Limiter
	ok, failed prometheus.Observer
}

func (t *timed) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	start := time.Now()
	d, err := t.next.Check(ctx, r)
	o := t.ok
	if err != nil {
		o = t.failed
	}
	o.Observe(time.Since(start).Seconds())
	return d, err
}

// CheckEach forwards to the store's CheckEach (see bouncer.CheckEach) and
// observes the time it took once per request, each having waited for it.
func (t *timed) CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error) {
	start := time.Now()
	bouncer.CheckEach(ctx, t.next, rs, ds, errs)
	took := time.Since(start).Seconds()
	for _, err := range errs {
		o := t.ok
		if err != nil {
			o = t.failed
		}
		o.Observe(took)
	}
}

func (t *timed) Refund(ctx context.Context, r bouncer.Request) error { return t.next.Refund(ctx, r) }

// Charge forwards to the store's Charge (store.Charger), or fails with
// an error wrapping errors.ErrUnsupported if it has none.
func (t *timed) Charge(ctx context.Context, r bouncer.Request) error {
	c, ok := t.next.(store.Charger)
	if !ok {
		return fmt.Errorf("metrics: %T cannot charge: %w", t.next, errors.ErrUnsupported)
	}
	return c.Charge(ctx, r)
}

// GetRecord, PutRecord and DeleteRecord forward to the store's
// (store.Records).
func (t *timed) GetRecord(ctx context.Context, key string) ([]byte, bool, error) {
	return store.ForwardRecords{Next: t.next}.GetRecord(ctx, key)
}

func (t *timed) PutRecord(ctx context.Context, key string, value []byte) error {
	return store.ForwardRecords{Next: t.next}.PutRecord(ctx, key, value)
}

func (t *timed) DeleteRecord(ctx context.Context, key string) error {
	return store.ForwardRecords{Next: t.next}.DeleteRecord(ctx, key)
}

// Reset forwards to the store's Reset (see bouncer.Reset).
func (t *timed) Reset(ctx context.Context, r bouncer.Request) error {
	return bouncer.Reset(ctx, t.next, r)
}

// GaugeFunc registers a gauge read from f at every scrape, such as a
// store's breaker state.
func GaugeFunc(reg prometheus.Registerer, name, help string, f func() float64) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}
