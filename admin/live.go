package admin

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/rules"
)

// Bounds of /live.json: how many recently seen keys it peeks at (each
// peek is a store call), how many denying keys it lists, and how long the
// peeks may take together.
const (
	livePeeks    = 32
	liveDenied   = 10
	livePeekTime = time.Second
)

// LiveView is what /live.json answers: the service, its decisions
// (totals, rates and history), the keys being denied, the store's
// health and the config's story.
type LiveView struct {
	Time          time.Time      `json:"time"`
	ConfigVersion string         `json:"config_version"`
	Service       *Service       `json:"service,omitempty"`        // nil when the handler was given none
	UptimeSeconds float64        `json:"uptime_seconds,omitempty"` // since Service.Started
	Degraded      []string       `json:"degraded,omitempty"`       // why decisions are made without the store now (Options.Degraded)
	Totals        Totals         `json:"totals"`
	Decisions     []DecisionStat `json:"decisions"`
	History       *HistoryView   `json:"history,omitempty"` // nil when the handler was given none
	MostDenied    []DeniedCount  `json:"most_denied"`
	DeniedKeys    []DeniedKey    `json:"denied_keys"`
	KeysOff       bool           `json:"keys_off,omitempty"`   // the key index is off (--admin-keys 0)
	KeysError     string         `json:"keys_error,omitempty"` // why the peeks stopped short
	Redis         *RedisHealth   `json:"redis,omitempty"`      // nil unless the store is Redis
	Hybrid        *HybridStats   `json:"hybrid,omitempty"`     // nil unless a hybrid limiter decides
	Reloads       map[string]int `json:"reloads"`              // attempts by result: success, unchanged, failure
	ReloadHistory []ReloadEvent  `json:"reload_history"`       // the last attempts, oldest first
}

// Service is what the live page shows of the process: its store and
// its listeners, and since when it runs.
type Service struct {
	Command    string     `json:"command"`               // serve or gateway
	Store      string     `json:"store"`                 // memory, redis, redis cluster or redis sentinel
	StoreAddrs []string   `json:"store_addrs,omitempty"` // the Redis addresses configured; never a password
	Listeners  []Listener `json:"listeners"`
	Started    time.Time  `json:"started,omitzero"`
}

// Listener is one address the process listens on.
type Listener struct {
	Name string `json:"name"` // grpc, http, admin, or a gateway listener's
	Addr string `json:"addr"`
}

// Totals add up the decisions of every rule since the process started.
// Denied counts every descriptor answered over the limit: by its limit
// (result over_limit) and by the store failure policy (degraded_denied).
// Shadowed ones were over the limit but let through by a shadow rule,
// so they are not in Denied.
type Totals struct {
	Decided         float64 `json:"decided"`
	Denied          float64 `json:"denied"`
	DegradedAllowed float64 `json:"degraded_allowed"`
	DegradedDenied  float64 `json:"degraded_denied"`
	Shadowed        float64 `json:"shadowed"`
}

// DecisionStat is one rule's decisions of one result: the
// bouncer_decisions_total counter, with result degraded split into
// degraded_allowed and degraded_denied (bouncer_degraded_denied_total).
type DecisionStat struct {
	Domain    string   `json:"domain"`
	Rule      string   `json:"rule"`           // as the metric labels it
	Path      string   `json:"path,omitempty"` // the rule's descriptor path, when Rule is its name
	Shadow    bool     `json:"shadow,omitempty"`
	Result    string   `json:"result"`
	Total     float64  `json:"total"`
	PerSecond *float64 `json:"per_second"` // over the history's last interval; null before it has one
}

// DeniedCount is a key among those denied most often since the key index
// first held them.
type DeniedCount struct {
	Key      string    `json:"key"`
	Domain   string    `json:"domain"`
	Rule     string    `json:"rule,omitempty"`
	Denied   uint64    `json:"denied"`
	LastSeen time.Time `json:"last_seen,omitzero"`
}

// DeniedKey is a recently seen key that at least one of its limits
// denies now (nothing left, or counted past the limit).
type DeniedKey struct {
	Key               string    `json:"key"`
	Domain            string    `json:"domain"`
	Rule              string    `json:"rule,omitempty"`
	Shadow            bool      `json:"shadow,omitempty"` // its rule is a shadow rule: it reports, never denies
	Limit             string    `json:"limit"`
	Rate              int64     `json:"rate"`
	PeriodSeconds     float64   `json:"period_seconds"`
	ResetAfterSeconds float64   `json:"reset_after_seconds"`
	LastSeen          time.Time `json:"last_seen,omitzero"`
}

// RedisHealth is the Redis store's health as its metrics report it.
type RedisHealth struct {
	Connected bool        `json:"connected"`
	Nodes     []RedisNode `json:"nodes"`
}

// HybridStats are the hybrid limiter's counters (package hybrid), as its
// metrics report them: leases by event (taken, returned, expired) and
// decisions by mode (strict, lease, async).
type HybridStats struct {
	Leases       map[string]float64 `json:"leases"`
	UnitsParked  float64            `json:"units_parked"`
	Syncs        float64            `json:"syncs"`
	OverAdmitted float64            `json:"over_admitted"`
	CacheHits    float64            `json:"cache_hits"`
	Throttled    float64            `json:"throttled"`
	Decisions    map[string]float64 `json:"decisions"`
}

// RedisNode is one Redis node's circuit breaker. Before the store first
// connects, the nodes are those configured (Service.StoreAddrs), with
// Connecting set and no breaker.
type RedisNode struct {
	Node       string `json:"node"`
	Breaker    string `json:"breaker"` // closed, half_open or open; "" while connecting
	Slow       bool   `json:"slow"`
	Connecting bool   `json:"connecting,omitempty"` // never connected yet
}

// ReloadEvent is one reload attempt (rules.ReloadRecord).
type ReloadEvent struct {
	Time     time.Time `json:"time"`
	Result   string    `json:"result"`  // reloaded, unchanged, restored, rejected or watch_failed
	Message  string    `json:"message"` // the reloader's sentence for it, as logged
	Version  string    `json:"version"` // the config served after it
	Problems []string  `json:"problems,omitempty"`
}

var reloadResults = map[rules.ReloadOutcome]string{
	rules.Reloaded: "reloaded", rules.Unchanged: "unchanged", rules.Restored: "restored",
	rules.Rejected: "rejected", rules.WatchFailed: "watch_failed",
}

// live serves the live page and its data.
type live struct {
	o Options
}

// mountLive serves the live page at GET /live, its script, style and
// chart library under GET /live/, and its data at GET /live.json on mux.
func mountLive(mux *http.ServeMux, o Options) {
	l := &live{o: o}
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) { serveAsset(w, "live.html") })
	mux.HandleFunc("GET /live/{file}", func(w http.ResponseWriter, r *http.Request) { serveAsset(w, r.PathValue("file")) })
	mux.HandleFunc("GET /live.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, l.view(r.Context(), time.Now()))
	})
}

// view builds what /live.json answers at now.
func (l *live) view(ctx context.Context, now time.Time) LiveView {
	c := l.o.Engine.Config()
	v := LiveView{Time: now, ConfigVersion: c.Version, Decisions: []DecisionStat{}, DeniedKeys: []DeniedKey{}, Reloads: map[string]int{}}
	if l.o.Service != nil {
		v.Service = l.o.Service
		v.UptimeSeconds = math.Round(now.Sub(l.o.Service.Started).Seconds())
	}
	if l.o.Degraded != nil {
		v.Degraded = l.o.Degraded()
	}
	if l.o.Gatherer != nil {
		readMetrics(&v, c, l.o.Gatherer)
	}
	if h := l.o.History; h != nil {
		v.History = h.view(c)
		for i := range v.Decisions {
			d := &v.Decisions[i]
			if r, ok := h.rate(series{ruleKey{d.Domain, d.Rule}, d.Result}); ok {
				d.PerSecond = &r
			}
		}
	}
	if s := l.o.Service; s != nil && len(s.StoreAddrs) > 0 && (v.Redis == nil || !v.Redis.Connected) {
		for _, addr := range s.StoreAddrs {
			n := node(redis(&v), addr)
			n.Breaker, n.Connecting = "", true
		}
	}
	if v.Redis != nil {
		slices.SortFunc(v.Redis.Nodes, func(a, b RedisNode) int { return strings.Compare(a.Node, b.Node) })
	}
	v.DeniedKeys, v.KeysOff, v.KeysError = l.denied(ctx)
	v.MostDenied = []DeniedCount{}
	if x := l.o.keys(); x != nil {
		for _, k := range x.MostDenied(liveDenied) {
			d := DeniedCount{Key: k.Key, Domain: k.Domain, Denied: k.Denied, LastSeen: k.LastSeen}
			if k.Rule != nil {
				d.Rule = k.Rule.Label()
			}
			v.MostDenied = append(v.MostDenied, d)
		}
	}
	v.ReloadHistory = []ReloadEvent{}
	if l.o.Reloads != nil {
		for _, r := range l.o.Reloads() {
			ev := ReloadEvent{Time: r.Time, Result: reloadResults[r.Outcome], Message: r.Outcome.String(), Version: r.Version}
			for _, p := range r.Problems {
				ev.Problems = append(ev.Problems, p.String())
			}
			v.ReloadHistory = append(v.ReloadHistory, ev)
		}
	}
	return v
}

// readMetrics fills v's decisions and totals, Redis health, hybrid
// counters and reload counts from g's metrics. It never names the
// metrics' types (their module is not one admin may import); it calls
// their methods.
func readMetrics(v *LiveView, c *rules.Config, g prometheus.Gatherer) {
	mfs, _ := g.Gather() // what gathered is good even when some collector failed
	totals := map[series]float64{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "bouncer_decisions_total", "bouncer_degraded_denied_total":
			for _, m := range mf.GetMetric() {
				addDecisions(totals, mf.GetName(), labels(m.GetLabel()), m.GetCounter().GetValue())
			}
		case "bouncer_config_reloads_total":
			for _, m := range mf.GetMetric() {
				v.Reloads[labels(m.GetLabel())["result"]] = int(m.GetCounter().GetValue())
			}
		case "bouncer_redis_connected":
			redis(v).Connected = len(mf.GetMetric()) > 0 && mf.GetMetric()[0].GetGauge().GetValue() == 1
		case "bouncer_redis_breaker_open":
			for _, m := range mf.GetMetric() {
				state := "closed"
				switch g := m.GetGauge().GetValue(); {
				case g >= 1:
					state = "open"
				case g > 0:
					state = "half_open"
				}
				node(redis(v), labels(m.GetLabel())["node"]).Breaker = state
			}
		case "bouncer_redis_node_slow":
			for _, m := range mf.GetMetric() {
				node(redis(v), labels(m.GetLabel())["node"]).Slow = m.GetGauge().GetValue() > 0
			}
		default:
			name, ok := strings.CutPrefix(mf.GetName(), "bouncer_hybrid_")
			if !ok {
				continue
			}
			if v.Hybrid == nil {
				v.Hybrid = &HybridStats{Leases: map[string]float64{}, Decisions: map[string]float64{}}
			}
			for _, m := range mf.GetMetric() {
				hybridValue(v.Hybrid, name, labels(m.GetLabel()), m.GetCounter().GetValue(), m.GetGauge().GetValue())
			}
		}
	}
	for s, total := range totals {
		if total <= 0 { // degraded_allowed when every degraded decision denied
			continue
		}
		d := DecisionStat{Domain: s.domain, Rule: s.rule, Result: s.result, Total: total}
		if r := findRule(c, s.domain, s.rule); r != nil {
			d.Path, d.Shadow = pathOf(r), r.Shadow
		}
		v.Decisions = append(v.Decisions, d)
		v.Totals.Decided += total
		switch s.result {
		case "over_limit":
			v.Totals.Denied += total
		case "degraded_denied":
			v.Totals.Denied += total
			v.Totals.DegradedDenied += total
		case "degraded_allowed":
			v.Totals.DegradedAllowed += total
		case "shadowed":
			v.Totals.Shadowed += total
		}
	}
	slices.SortFunc(v.Decisions, func(a, b DecisionStat) int {
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Result, b.Result))
	})
}

// addDecisions adds one series of metric (bouncer_decisions_total or
// bouncer_degraded_denied_total) to totals, splitting result degraded
// into degraded_allowed and degraded_denied: the second counter is the
// denied part of the first.
func addDecisions(totals map[series]float64, metric string, l map[string]string, value float64) {
	k := ruleKey{l["domain"], l["rule"]}
	if metric == "bouncer_degraded_denied_total" {
		totals[series{k, "degraded_denied"}] += value
		totals[series{k, "degraded_allowed"}] -= value
		return
	}
	result := l["result"]
	if result == "degraded" {
		result = "degraded_allowed"
	}
	totals[series{k, result}] += value
}

// hybridValue sets one of h's counters: name is the metric's, less
// bouncer_hybrid_; counter and gauge its values (the one it has).
func hybridValue(h *HybridStats, name string, l map[string]string, counter, gauge float64) {
	switch name {
	case "leases_total":
		h.Leases[l["event"]] = counter
	case "decisions_total":
		h.Decisions[l["mode"]] = counter
	case "units_parked":
		h.UnitsParked = gauge
	case "syncs_total":
		h.Syncs = counter
	case "over_admitted_total":
		h.OverAdmitted = counter
	case "cache_hits_total":
		h.CacheHits = counter
	case "throttled_total":
		h.Throttled = counter
	}
}

func redis(v *LiveView) *RedisHealth {
	if v.Redis == nil {
		v.Redis = &RedisHealth{Nodes: []RedisNode{}}
	}
	return v.Redis
}

func node(h *RedisHealth, addr string) *RedisNode {
	for i := range h.Nodes {
		if h.Nodes[i].Node == addr {
			return &h.Nodes[i]
		}
	}
	h.Nodes = append(h.Nodes, RedisNode{Node: addr, Breaker: "closed"})
	return &h.Nodes[len(h.Nodes)-1]
}

// labelPair is a metric's label as the gatherer gives it.
type labelPair interface {
	GetName() string
	GetValue() string
}

func labels[P labelPair](pairs []P) map[string]string {
	out := make(map[string]string, len(pairs))
	for _, lp := range pairs {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// pathOf returns r's descriptor path if its label is its name, else "".
func pathOf(r *rules.Rule) string {
	if r.Label() == r.Path {
		return ""
	}
	return r.Path
}

// findRule returns the rule of domain that the metrics label label
// (rules.Rule.Label: its name, or its descriptor path if it has none),
// or nil.
func findRule(c *rules.Config, domain, label string) *rules.Rule {
	d := c.Domain(domain)
	if d == nil || label == "" {
		return nil
	}
	for _, r := range d.Rules {
		if r.Label() == label {
			return r
		}
	}
	return nil
}

// denied peeks at the livePeeks keys seen most recently and returns
// those a limit denies now, most recently seen first.
func (l *live) denied(ctx context.Context) (out []DeniedKey, off bool, failed string) {
	out = []DeniedKey{}
	x := l.o.keys()
	if x == nil {
		return out, true, ""
	}
	keys, _ := x.List("", x.Len()+1)
	slices.SortFunc(keys, func(a, b IndexedKey) int { return b.LastSeen.Compare(a.LastSeen) })
	keys = keys[:min(len(keys), livePeeks)]
	ctx, cancel := context.WithTimeout(ctx, livePeekTime)
	defer cancel()
	for _, k := range keys {
		states, err := l.o.Engine.State(ctx, k.KeyInfo)
		if err != nil {
			return out, false, err.Error()
		}
		for _, s := range states {
			if s.Allowed && s.Remaining > 0 {
				continue
			}
			d := DeniedKey{
				Key: k.Key, Domain: k.Domain, Limit: s.Limit.Name, Rate: s.Limit.Rate,
				PeriodSeconds: s.Limit.Period.Seconds(), ResetAfterSeconds: s.ResetAfter.Seconds(), LastSeen: k.LastSeen,
			}
			if k.Rule != nil {
				d.Rule, d.Shadow = k.Rule.Label(), k.Rule.Shadow
			}
			out = append(out, d)
			break
		}
		if len(out) == liveDenied {
			break
		}
	}
	return out, false, ""
}
