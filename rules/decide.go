package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/storekey"
)

// Engine decides requests against the config it holds, charging a
// bouncer.Limiter. It is safe for concurrent use; Swap replaces the config
// atomically, and a request in flight finishes on the config it started
// with.
type Engine struct {
	// Limiter keeps the counts. Required.
	Limiter bouncer.Limiter

	// Now reads the clock that envoyproxy/ratelimit semantics compute
	// duration_until_reset from (that project's formula: the unit minus
	// the Unix time modulo the unit). Nil means time.Now.
	Now func() time.Time

	// RejectUnknownDomains makes Decide fail with ErrUnknownDomain for a
	// domain the config does not define. By default such a request is
	// allowed and no descriptor has a limit, as in envoyproxy/ratelimit.
	RejectUnknownDomains bool

	// Supports, if not nil, says whether the store can count a limit that
	// a request sets (a descriptor's limit override); a request whose
	// override it rejects fails with ErrInvalidRequest. The config's own
	// limits are checked when it loads (Config.CheckLimits).
	Supports func(bouncer.Limit) error

	// Keys, if not nil, remembers the keys decided most recently, for the
	// admin API to list (stores keep no keys, only hashes or digests).
	Keys *KeyIndex

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

// MaxLoggedDomains bounds the unknown domains an Engine logs: clients
// choose domains, and one line each would let them fill the log.
const MaxLoggedDomains = 100

// NewEngine returns an engine serving c, counting in lim.
func NewEngine(c *Config, lim bouncer.Limiter) *Engine {
	e := &Engine{Limiter: lim}
	e.config.Store(c)
	return e
}

// Config returns the config being served.
func (e *Engine) Config() *Config { return e.config.Load() }

// Swap serves c from now on and returns the config it replaces.
func (e *Engine) Swap(c *Config) *Config { return e.config.Swap(c) }

// matched is one descriptor after lookup.
type matched struct {
	rule      *Rule
	limits    []bouncer.Limit
	unlimited bool
	shadow    bool
	quota     bool
	zero      bool    // a limit of 0 (zeroLimit)
	override  bool    // an envoy-semantics override: limits count, report.RequestsPerUnit judges (countLimit)
	entries   []Entry // as matched: client IPs aggregated, the plan left out
	key       string
	cost      int64
	report    CurrentLimit
}

// Decide answers r. A non-nil error wraps ErrInvalidRequest or
// ErrUnknownDomain, or is the store's failure; nothing is decided then,
// and no lease is held (leases taken before the failure are released). A
// caller that can hold requests waits Response.Delay before it proceeds;
// one that learns how requests end gives units back with Refund.
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
	d := e.config.Load().Domain(r.Domain)
	if err := r.validate(); err != nil {
		return Response{}, d, err
	}
	resp := Response{Code: OK, Statuses: make([]Status, len(r.Descriptors)), Binding: -1}
	for i := range resp.Statuses {
		resp.Statuses[i].Code = OK
	}
	if d == nil {
		e.unknownDomain(ctx, r.Domain)
		if e.RejectUnknownDomains {
			return Response{}, nil, fmt.Errorf("%w: %q", ErrUnknownDomain, r.Domain)
		}
		return resp, nil, nil
	}
	if err := d.checkOverrides(&r, e.Supports); err != nil {
		return Response{}, d, err
	}
	ms, replaced := d.matchAll(&r)
	if e.Keys != nil {
		e.Keys.note(d.Name, ms, e.now())
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
		return Response{}, d, errors.Join(err, e.Refund(context.WithoutCancel(ctx), &resp, leases))
	}
	for i, rp := range replaced {
		if rp.rule != nil {
			resp.Statuses[i].Rule = rp.rule // and no Limit: see Status.Replaced
		}
	}
	if e.Keys != nil {
		e.Keys.noteDenied(&resp)
	}
	resp.finish()
	return resp, d, nil
}

// Replaced reports whether the descriptor matched a rule that another
// rule of the same request replaces (envoyproxy/ratelimit's replaces):
// Rule is then the replaced rule, and Limit is nil, since no limit was
// checked. The answer is OK, as for a descriptor no rule matches; RLS and
// the JSON API report it as envoyproxy/ratelimit does, without a
// current_limit and with limit_remaining 0.
func (s *Status) Replaced() bool { return s.Rule != nil && s.Limit == nil && !s.Unlimited }

// replacement is a descriptor's rule that another matched rule replaces.
type replacement struct {
	rule, by *Rule
}

// counted reports whether m is checked in the store: matched, limited,
// and not unlimited.
func (m *matched) counted() bool { return m != nil && !m.unlimited && len(m.limits) > 0 }

// matchAll looks every descriptor up and applies replaces: a rule named in
// the replaces of another matched rule does not apply, and is left out
// of ms and named in replaced (nil when no rule was replaced).
func (d *Domain) matchAll(r *Request) (ms []*matched, replaced []replacement) {
	ms = make([]*matched, len(r.Descriptors))
	pool := make([]matched, len(r.Descriptors))
	var by map[string]*Rule
	var buf [8]string
	values := buf[:]
	for _, desc := range r.Descriptors {
		if len(desc.Entries) > len(values) {
			values = make([]string, MaxEntries)
		}
	}
	for i, desc := range r.Descriptors {
		m := &pool[i]
		if !d.match(r, i, desc, values, m) {
			continue
		}
		ms[i] = m
		if m.rule != nil && len(m.rule.Replaces) > 0 {
			if by == nil {
				by = map[string]*Rule{}
			}
			for _, name := range m.rule.Replaces {
				by[name] = m.rule
			}
		}
	}
	if by == nil {
		return ms, nil
	}
	for i, m := range ms {
		if m != nil && m.rule != nil && !m.unlimited && m.rule.Name != "" && by[m.rule.Name] != nil {
			if replaced == nil {
				replaced = make([]replacement, len(ms))
			}
			replaced[i] = replacement{rule: m.rule, by: by[m.rule.Name]}
			ms[i] = nil
		}
	}
	return ms, replaced
}

// explain logs, at Debug, the descriptors of r that matched nothing
// because they carry only the plan entry, and those whose rule was
// replaced: both answer OK with no limit, which says nothing of why.
func (d *Domain) explain(ctx context.Context, log *slog.Logger, r *Request, ms []*matched, replaced []replacement) {
	for i, desc := range r.Descriptors {
		switch {
		case replaced != nil && replaced[i].rule != nil:
			rp := replaced[i]
			log.DebugContext(ctx, "descriptor not limited: its rule is replaced by another rule of the request",
				"domain", d.Name, "descriptor", i, "rule", rp.rule.Path, "rule_name", rp.rule.Name,
				"replaced_by", rp.by.Path, "replaced_by_name", rp.by.Name)
		case ms[i] == nil && d.PlanKey != "" && len(desc.Entries) > 0 && onlyPlan(desc.Entries, d.PlanKey):
			log.DebugContext(ctx, "descriptor not limited: it carries only the plan entry; the plan entry belongs in the descriptor it qualifies",
				"domain", d.Name, "descriptor", i, "plan_key", d.PlanKey)
		}
	}
}

func onlyPlan(entries []Entry, planKey string) bool {
	for _, e := range entries {
		if e.Key != planKey {
			return false
		}
	}
	return true
}

// unknownDomains remembers the unknown domains an engine has logged.
type unknownDomains struct {
	mu     sync.Mutex
	logged map[string]bool
	full   bool // the summary line is written: no more are logged
}

// unknownDomain logs a request for name, a domain the config does not
// define, the first time it is seen, up to MaxLoggedDomains domains.
func (e *Engine) unknownDomain(ctx context.Context, name string) {
	u := &e.unknown
	u.mu.Lock()
	if u.full || u.logged[name] {
		u.mu.Unlock()
		return
	}
	if len(u.logged) == MaxLoggedDomains {
		u.full = true
		u.mu.Unlock()
		e.logger().WarnContext(ctx, "more unknown domains requested; no more are logged (see bouncer_unknown_domain_requests_total)",
			"logged", MaxLoggedDomains)
		return
	}
	if u.logged == nil {
		u.logged = map[string]bool{}
	}
	u.logged[name] = true
	u.mu.Unlock()
	answer := "answered OK with no limit"
	if e.RejectUnknownDomains {
		answer = "rejected"
	}
	attrs := []any{"domain", name, "answer", answer}
	for _, d := range e.config.Load().Domains() {
		if strings.EqualFold(d.Name, name) {
			attrs = append(attrs, "did_you_mean", d.Name) // domains are case-sensitive
			break
		}
	}
	e.logger().WarnContext(ctx, "request for a domain the config does not define (logged once per domain)", attrs...)
}

func (e *Engine) logger() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.Default()
}

// match looks descriptor i up, filling m; false when no rule applies.
func (d *Domain) match(r *Request, i int, desc Descriptor, values []string, m *matched) bool {
	entries, plan := desc.Entries, ""
	if d.PlanKey != "" || d.ips != nil {
		entries = make([]Entry, 0, len(desc.Entries))
		for _, e := range desc.Entries {
			if d.PlanKey != "" && e.Key == d.PlanKey {
				plan = e.Value
				continue
			}
			if p, ok := d.ips[e.Key]; ok {
				e.Value = p.apply(e.Value)
			}
			entries = append(entries, e)
		}
		if plan == "" {
			plan = d.DefaultPlan
		}
	}
	m.cost, m.entries = r.hits(i), entries
	if o := desc.Limit; o != nil {
		l := d.overrideLimit(o)
		for j, e := range entries {
			values[j] = e.Value
		}
		m.key = storeKey(d.Name, entries, values[:len(entries)])
		m.report = CurrentLimit{Name: "", RequestsPerUnit: o.RequestsPerUnit, Unit: o.Unit, Window: l.Period}
		switch {
		case d.Semantics == EnvoySemantics:
			m.limits, m.override = []bouncer.Limit{countLimit(o.Unit)}, true
		case l.Rate > 0:
			m.limits = []bouncer.Limit{l}
		}
		return true
	}
	found := d.root.lookup(entries, values)
	if found.rule == nil {
		return false
	}
	m.rule = found.rule
	m.limits, m.unlimited = found.rule.limitsFor(plan)
	m.shadow, m.quota, m.zero = found.rule.Shadow, found.rule.QuotaMode, found.rule.zero
	if m.zero {
		m.key = storeKey(d.Name, entries, found.values)
		m.report = CurrentLimit{Name: found.rule.Name, Unit: found.rule.Unit, Window: found.rule.Unit.Duration()}
		return true
	}
	if !m.unlimited {
		m.key = storeKey(d.Name, entries, found.values)
		m.report = CurrentLimit{Name: found.rule.Name, RequestsPerUnit: found.rule.RequestsPerUnit, Unit: found.rule.Unit}
		if len(m.limits) > 0 {
			l := m.limits[0]
			m.report.RequestsPerUnit = uint32(min(l.Rate, math.MaxUint32))
			m.report.Unit, m.report.Window = unitOf(l.Period), l.Period
		} else {
			m.report.Window = found.rule.Unit.Duration()
		}
	}
	return true
}

// overrideLimit is the limit a descriptor's override sets in d.
func (d *Domain) overrideLimit(o *Override) bouncer.Limit {
	return bouncer.Limit{
		Name: limitName("", o.Unit), Algorithm: bouncer.FixedWindow,
		Rate: int64(o.RequestsPerUnit), Period: o.Unit.Duration(),
		ChargeDenied: d.Semantics == EnvoySemantics,
	}
}

// countLimit is the limit an envoy-semantics override is counted under:
// one per unit, whatever the override's rate, since envoyproxy/ratelimit
// keys a count by domain, entries and window, never by the limit. A
// request that changes its override mid-window (3 per minute, then 5)
// reads the same count against the new rate (see matched.judge). Stores
// keep state per limit value, so the rate is fixed at the most a window
// of the unit can count, charging denied checks as the reference does.
func countLimit(u Unit) bouncer.Limit {
	p := u.Duration()
	return bouncer.Limit{
		Name: limitName("", u), Algorithm: bouncer.FixedWindow,
		Rate: min(bouncer.MaxRate, int64(p)-2), Period: p,
		ChargeDenied: true,
	}
}

// judge turns dec, the decision of m.request(), into the decision against
// the limit m reports: for an override, dec counts under countLimit, and
// the count after the charge is over the override's rate when it exceeds
// it (envoyproxy/ratelimit's test), hits past the limit included.
func (m *matched) judge(dec bouncer.Decision) bouncer.Decision {
	if !m.override {
		return dec
	}
	rate, c := int64(m.report.RequestsPerUnit), m.limits[0].Rate
	count := c - dec.Remaining
	if !dec.Allowed {
		count = c + 1
	}
	dec.Limit, dec.Remaining = rate, max(rate-count, 0)
	dec.Allowed = count <= rate
	switch {
	case dec.Allowed:
		dec.RetryAfter = 0
	case m.cost > rate:
		dec.RetryAfter = bouncer.Never
	default:
		dec.RetryAfter = dec.ResetAfter
	}
	return dec
}

// checkOverrides rejects overrides that the store cannot count, such as
// a billion or more per second: they are the
// caller's mistake, not a store failure. A rate of 0 admits nothing and is
// never counted.
func (d *Domain) checkOverrides(r *Request, supports func(bouncer.Limit) error) error {
	for i, desc := range r.Descriptors {
		if o := desc.Limit; o != nil && o.RequestsPerUnit > 0 {
			l := d.overrideLimit(o)
			err := l.Validate()
			if err == nil && supports != nil {
				err = supports(l)
			}
			if err != nil {
				return fmt.Errorf("%w: descriptors[%d].limit: %v", ErrInvalidRequest, i, err)
			}
		}
	}
	return nil
}

// storeKey is the key a descriptor is counted under: the domain and the
// entries' keys and values, escaped and bounded by storekey.Join.
func storeKey(domain string, entries []Entry, values []string) string {
	var buf [9]string // a domain and four entries without allocating
	parts := buf[:0]
	parts = append(parts, domain)
	for i, e := range entries {
		parts = append(parts, e.Key, values[i])
	}
	return storekey.Join(parts...)
}

// decideEach charges every matched descriptor on its own, over-limit hits
// included, as envoyproxy/ratelimit does.
func (e *Engine) decideEach(ctx context.Context, d *Domain, ms []*matched, resp *Response) error {
	now := e.now()
	checks := 0
	for i, m := range ms {
		st := &resp.Statuses[i]
		if m == nil {
			continue
		}
		st.Rule = m.rule
		if m.unlimited {
			st.Unlimited, st.Remaining = true, math.MaxUint32
			continue
		}
		st.Limit, st.Key = &m.report, m.key
		st.ResetAfter = untilReset(m.report.Unit, now)
		if len(m.limits) == 0 { // requests_per_unit 0 admits nothing
			if m.cost > 0 {
				st.Code, st.RetryAfter = OverLimit, bouncer.Never
			}
			continue
		}
		checks++
	}
	if checks > 1 && e.Concurrent && distinctKeys(ms) {
		return e.checkConcurrently(ctx, ms, resp)
	}
	for i, m := range ms {
		if !m.counted() {
			continue
		}
		if err := e.checkOne(ctx, m, resp, i); err != nil {
			return err
		}
	}
	return nil
}

// checkOne charges descriptor i, m, on its own and fills its status.
func (e *Engine) checkOne(ctx context.Context, m *matched, resp *Response, i int) error {
	dec, err := e.Limiter.Check(ctx, m.request())
	if err != nil {
		return err
	}
	dec = m.judge(dec)
	m.fill(&resp.Statuses[i], dec)
	resp.charged(m, dec)
	return nil
}

// request is the check of m's descriptor on its own.
func (m *matched) request() bouncer.Request {
	cost := m.cost
	if m.zero {
		cost *= 2 // see zeroLimit
	}
	return bouncer.Request{
		Keys: []bouncer.KeyLimits{{Key: m.key, Limits: m.limits}},
		Cost: cost,
		Peek: cost == 0,
	}
}

// fill fills in st from dec, the decision of m.request().
func (m *matched) fill(st *Status, dec bouncer.Decision) {
	st.Remaining = clamp32(dec.Remaining)
	if m.zero {
		st.Remaining = 0
	}
	st.RetryAfter, st.Delay, st.Degraded = dec.RetryAfter, dec.Delay, dec.Degraded
	if !dec.Allowed {
		st.Code = OverLimit
		if m.shadow {
			st.Code, st.Shadowed = OK, true
		}
		// A quota-mode status stays over the limit; finish decides
		// whether it denies the request.
	}
}

// checkConcurrently checks every descriptor at once (bouncer.CheckEach):
// for a store with round trips, the answer then takes one of them, not
// one per descriptor. Only for distinct keys, whose order does not matter.
func (e *Engine) checkConcurrently(ctx context.Context, ms []*matched, resp *Response) error {
	var (
		rbuf [4]bouncer.Request
		dbuf [4]bouncer.Decision
		ebuf [4]error
		ibuf [4]int
	)
	rs, idx := rbuf[:0], ibuf[:0]
	for i, m := range ms {
		if m.counted() {
			rs, idx = append(rs, m.request()), append(idx, i)
		}
	}
	ds, errs := dbuf[:0], ebuf[:0]
	if len(rs) > len(dbuf) {
		ds, errs = make([]bouncer.Decision, 0, len(rs)), make([]error, 0, len(rs))
	}
	ds, errs = ds[:len(rs)], errs[:len(rs)]
	bouncer.CheckEach(ctx, e.Limiter, rs, ds, errs)
	for k, i := range idx {
		if errs[k] == nil {
			dec := ms[i].judge(ds[k])
			ms[i].fill(&resp.Statuses[i], dec)
			resp.charged(ms[i], dec)
		}
	}
	return errors.Join(errs...)
}

func distinctKeys(ms []*matched) bool {
	for i, m := range ms {
		if m == nil {
			continue
		}
		for _, o := range ms[:i] {
			if o != nil && o.key == m.key {
				return false
			}
		}
	}
	return true
}

// untilReset is envoyproxy/ratelimit's duration_until_reset: the unit
// minus the Unix time in whole seconds modulo the unit.
func untilReset(u Unit, now time.Time) time.Duration {
	sec := int64(u.Duration() / time.Second)
	if sec == 0 {
		return 0
	}
	return time.Duration(sec-now.Unix()%sec) * time.Second
}

// decideTogether decides the matched descriptors as one all-or-nothing
// check (shadow rules as a second one, so that they never block or undo
// the others), then reports each descriptor's own state.
func (e *Engine) decideTogether(ctx context.Context, ms []*matched, resp *Response) error {
	type group struct {
		shadow bool
		cost   int64
	}
	var order []group
	members := map[group][]int{}
	for i, m := range ms {
		if m == nil {
			continue
		}
		st := &resp.Statuses[i]
		st.Rule = m.rule
		if m.unlimited {
			st.Unlimited, st.Remaining = true, math.MaxUint32
			continue
		}
		st.Limit, st.Key = &m.report, m.key
		if len(m.limits) == 0 {
			if m.cost > 0 {
				st.Code, st.RetryAfter = OverLimit, bouncer.Never
			}
			continue
		}
		g := group{shadow: m.shadow || m.quota, cost: m.cost}
		if _, ok := members[g]; !ok {
			order = append(order, g)
		}
		members[g] = append(members[g], i)
	}
	for _, g := range order {
		idx := members[g]
		req := bouncer.Request{Cost: g.cost, Peek: g.cost == 0}
		first := map[string]int{} // a key named twice is checked once
		for _, i := range idx {
			if _, dup := first[ms[i].key]; dup {
				continue
			}
			first[ms[i].key] = i
			req.Keys = append(req.Keys, bouncer.KeyLimits{Key: ms[i].key, Limits: ms[i].limits})
		}
		dec, err := e.Limiter.Check(ctx, req)
		if err != nil {
			return err
		}
		if dec.Allowed && g.cost > 0 {
			for _, k := range req.Keys {
				m := ms[first[k.Key]]
				resp.charges = append(resp.charges, charge{rule: m.rule, key: k.Key, limits: k.Limits, cost: g.cost})
			}
		}
		for _, i := range idx {
			st := &resp.Statuses[i]
			own := dec
			if ms[i].key != dec.Key && len(req.Keys) > 1 {
				// The decision describes the binding key; peek at this
				// one to report its own state. A peek denies only what is
				// over by itself (a charge_denied window counted past its
				// limit), so the other descriptors of a denied check read
				// OK.
				own, err = e.Limiter.Check(ctx, bouncer.Request{
					Keys: []bouncer.KeyLimits{{Key: ms[i].key, Limits: ms[i].limits}},
					Peek: true,
				})
				if err != nil {
					return err
				}
			}
			setStatus(st, ms[i], own)
			if dec.Allowed {
				st.Delay = dec.Delay // the group's check is what admits it
			}
		}
	}
	return nil
}

// setStatus fills a Bouncer-semantics status from the decision that
// describes its key.
func setStatus(st *Status, m *matched, d bouncer.Decision) {
	st.Remaining = clamp32(d.Remaining)
	st.ResetAfter, st.RetryAfter, st.Degraded = d.ResetAfter, d.RetryAfter, d.Degraded
	if i := slices.IndexFunc(m.limits, func(l bouncer.Limit) bool { return l.Name == d.LimitName }); i >= 0 {
		l := m.limits[i]
		st.Limit = &CurrentLimit{Name: l.Name, RequestsPerUnit: clamp32(l.Rate), Unit: unitOf(l.Period), Window: l.Period}
	}
	if !d.Allowed {
		st.Code = OverLimit
		if m.shadow || m.quota {
			st.Code, st.Shadowed = OK, true
		}
		if m.quota {
			st.ResetAfter = 0
		}
	}
}

func (r *Response) finish() {
	quota, quotaOver, firstQuotaOver := 0, 0, -1
	least := uint32(math.MaxUint32)
	for i := range r.Statuses {
		st := &r.Statuses[i]
		switch {
		case st.quotaMode():
			quota++
			if st.Code == OverLimit {
				quotaOver++
				if firstQuotaOver < 0 {
					firstQuotaOver = i
				}
			}
		case st.Code == OverLimit:
			if r.Code != OverLimit {
				r.Binding = i
			}
			r.Code = OverLimit
			continue
		}
		if r.Code != OverLimit && st.Limit != nil && (r.Binding < 0 || st.Remaining < least) {
			r.Binding, least = i, st.Remaining
		}
	}
	if r.Code != OverLimit && quota > 0 && quotaOver == quota {
		r.Code, r.Binding = OverLimit, firstQuotaOver
	}
}

// quotaMode reports whether st is a limited status of a quota-mode rule:
// over its limit, it denies the request only when every such status of
// the request is over its own (envoyproxy/ratelimit's rule since it
// fixed quota results, after the version the differential test pins).
func (st *Status) quotaMode() bool {
	return st.Rule != nil && st.Rule.QuotaMode && st.Limit != nil && !st.Unlimited
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func clamp32(n int64) uint32 { return uint32(min(max(n, 0), math.MaxUint32)) }
