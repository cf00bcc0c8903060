package admin

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/rules"
)

// livePage is the live page: one HTML file with its style and script
// inline, so that it needs nothing but /live.json.
//
//go:embed live.html
var livePage []byte

// liveCSP allows the page's own inline style and script, by their
// hashes, and fetches from the admin listener only: keys come from
// clients, so whatever slipped past the page's escaping still could not
// run or load anything.
var liveCSP = "default-src 'self'; script-src " + inlineHash("script") + "; style-src " + inlineHash("style") +
	"; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash returns the CSP source of the page's one <tag> element.
func inlineHash(tag string) string {
	_, rest, ok := bytes.Cut(livePage, []byte("<"+tag+">"))
	body, _, ok2 := bytes.Cut(rest, []byte("</"+tag+">"))
	if !ok || !ok2 {
		panic("admin: live.html has no <" + tag + "> element")
	}
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Bounds of /live.json: how many recently seen keys it peeks at (each
// peek is a store call), how many denying keys it lists, and how long the
// peeks may take together.
const (
	livePeeks    = 32
	liveDenied   = 10
	livePeekTime = time.Second
)

// LiveView is what /live.json answers: the counters the live page turns
// into rates (it divides the difference of two fetches by their Time),
// the keys being denied, the store's health and the config's story.
type LiveView struct {
	Time          time.Time      `json:"time"`
	ConfigVersion string         `json:"config_version"`
	Decisions     []DecisionStat `json:"decisions"`
	MostDenied    []DeniedCount  `json:"most_denied"`
	DeniedKeys    []DeniedKey    `json:"denied_keys"`
	KeysOff       bool           `json:"keys_off,omitempty"`   // the key index is off (--admin-keys 0)
	KeysError     string         `json:"keys_error,omitempty"` // why the peeks stopped short
	Redis         *RedisHealth   `json:"redis,omitempty"`      // nil unless the store is Redis
	Hybrid        *HybridStats   `json:"hybrid,omitempty"`     // nil unless a hybrid limiter decides
	Reloads       map[string]int `json:"reloads"`              // attempts by result: success, unchanged, failure
	ReloadHistory []ReloadEvent  `json:"reload_history"`       // the last attempts, oldest first
}

// DecisionStat is one bouncer_decisions_total counter.
type DecisionStat struct {
	Domain string  `json:"domain"`
	Rule   string  `json:"rule"`           // the descriptor path, as the metric labels it
	Name   string  `json:"name,omitempty"` // the rule's name, when it has one
	Result string  `json:"result"`
	Total  float64 `json:"total"`
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

// RedisNode is one Redis node's circuit breaker.
type RedisNode struct {
	Node    string `json:"node"`
	Breaker string `json:"breaker"` // closed, half_open or open
	Slow    bool   `json:"slow"`
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

// mountLive serves the live page at GET /live and its data at GET
// /live.json on mux.
func mountLive(mux *http.ServeMux, o Options) {
	l := &live{o: o}
	mux.HandleFunc("GET /live", l.page)
	mux.HandleFunc("GET /live.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		writeJSON(w, http.StatusOK, l.view(r.Context(), time.Now()))
	})
}

func (l *live) page(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", liveCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(livePage)
}

// view builds what /live.json answers at now.
func (l *live) view(ctx context.Context, now time.Time) LiveView {
	c := l.o.Engine.Config()
	v := LiveView{Time: now, ConfigVersion: c.Version, Decisions: []DecisionStat{}, DeniedKeys: []DeniedKey{}, Reloads: map[string]int{}}
	if l.o.Gatherer != nil {
		readMetrics(&v, c, l.o.Gatherer)
	}
	v.DeniedKeys, v.KeysOff, v.KeysError = l.denied(ctx)
	v.MostDenied = []DeniedCount{}
	if x := l.o.Engine.Keys; x != nil {
		for _, k := range x.MostDenied(liveDenied) {
			d := DeniedCount{Key: k.Key, Domain: k.Domain, Denied: k.Denied, LastSeen: k.LastSeen}
			if k.Rule != nil {
				d.Rule = cmp.Or(k.Rule.Name, k.Rule.Path)
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

// readMetrics fills v's decisions, Redis health and reload counts from
// g's metrics. It never names the metrics' types (their module is not
// one admin may import); it calls their methods.
func readMetrics(v *LiveView, c *rules.Config, g prometheus.Gatherer) {
	mfs, _ := g.Gather() // what gathered is good even when some collector failed
	for _, mf := range mfs {
		switch mf.GetName() {
		case "bouncer_decisions_total":
			for _, m := range mf.GetMetric() {
				l := labels(m.GetLabel())
				v.Decisions = append(v.Decisions, DecisionStat{
					Domain: l["domain"], Rule: l["rule"], Name: ruleName(c, l["domain"], l["rule"]),
					Result: l["result"], Total: m.GetCounter().GetValue(),
				})
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
	if v.Redis != nil {
		slices.SortFunc(v.Redis.Nodes, func(a, b RedisNode) int { return strings.Compare(a.Node, b.Node) })
	}
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

// ruleName returns the name of the first rule of domain at path, or "".
func ruleName(c *rules.Config, domain, path string) string {
	d := c.Domain(domain)
	if d == nil {
		return ""
	}
	for _, r := range d.Rules {
		if r.Path == path {
			return r.Name
		}
	}
	return ""
}

// denied peeks at the livePeeks keys seen most recently and returns
// those a limit denies now, most recently seen first.
func (l *live) denied(ctx context.Context) (out []DeniedKey, off bool, failed string) {
	out = []DeniedKey{}
	x := l.o.Engine.Keys
	if x == nil {
		return out, true, ""
	}
	keys, _ := x.List("", x.Len()+1)
	slices.SortFunc(keys, func(a, b rules.KeyInfo) int { return b.LastSeen.Compare(a.LastSeen) })
	keys = keys[:min(len(keys), livePeeks)]
	ctx, cancel := context.WithTimeout(ctx, livePeekTime)
	defer cancel()
	for _, k := range keys {
		states, err := l.o.Engine.State(ctx, k)
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
				d.Rule = cmp.Or(k.Rule.Name, k.Rule.Path)
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
