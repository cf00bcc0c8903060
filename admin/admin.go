// Package admin serves Bouncer's admin API, on a listener of its own that
// is never the public one: health and readiness, Prometheus metrics,
// pprof, the config being served and its rules, and the keys decided
// recently (listed with opaque cursors), each key's state, and a reset.
package admin

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bouncerhq/bouncer/rules"
)

// DefaultPageSize is how many items a list returns when the request
// names no limit; MaxPageSize bounds what it may name.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Options configure the handler.
type Options struct {
	// Engine is the engine whose config is shown. Required. Its Keys,
	// when a *KeyIndex, is the index of the keys decided recently, which
	// /v1/keys lists, /v1/keys/state and /v1/keys/reset find by ?key=,
	// and the live page peeks at; otherwise the index is off: /v1/keys
	// answers 501 and keys are found by descriptor only.
	Engine *rules.Engine

	// Gatherer serves /metrics; nil means no metrics endpoint.
	Gatherer prometheus.Gatherer

	// Ready reports whether the service takes traffic; /readyz answers
	// 503 while it returns false (during shutdown). Nil means always.
	Ready func() bool

	// Degraded returns why the service decides without its shared store
	// now (Redis not connected, a node's breaker open, a node slow), one
	// reason each, or nil. While it returns any, /readyz answers 200
	// with "status": "degraded" and the reasons: every instance shares
	// the same Redis, so taking them all out of rotation would turn a
	// degraded limit into an outage. Nil means never degraded.
	Degraded func() []string

	// Reloads returns the last reload attempts, oldest first
	// (rules.Reloader.History), for the live page; nil means none.
	Reloads func() []rules.ReloadRecord

	// History is the decisions' history the live page charts; the
	// caller samples it (History.Run). Nil means no history and no
	// rates.
	History *History

	// Service describes the process for the live page (store,
	// listeners, start); nil means the page shows none.
	Service *Service

	// Extra are the command's own endpoints, such as the gateway's
	// GET /v1/upstreams: each is served at its method and path, and
	// GET / lists it after the admin API's own.
	Extra []Extra

	// Credentials says the admin API's writes need a token: runtime
	// limits (PUT and DELETE /v1/limits) are refused without one.
	Credentials bool

	// Logger writes the audit of runtime limits (nil: slog.Default);
	// OnLimitsChange, if set, is told each change too (a metric).
	Logger         *slog.Logger
	OnLimitsChange func(LimitsChange)
}

// Extra is an endpoint a command adds to the admin API.
type Extra struct {
	Endpoint
	Handler http.Handler
}

// Handler returns the admin API's handler.
func Handler(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if o.Ready != nil && !o.Ready() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
			return
		}
		version := o.Engine.Config().Version
		if o.Degraded != nil {
			if reasons := o.Degraded(); len(reasons) > 0 {
				writeJSON(w, http.StatusOK, map[string]any{"status": "degraded", "reasons": reasons, "config_version": version})
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "config_version": version})
	})
	if o.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, _ *http.Request) {
		c := o.Engine.Config()
		var domains []map[string]any
		for _, d := range c.Domains() {
			domains = append(domains, map[string]any{"name": d.Name, "file": d.File, "semantics": d.Semantics.String(), "rules": len(d.Rules)})
		}
		writeJSON(w, http.StatusOK, map[string]any{"version": c.Version, "files": c.Files, "domains": domains})
	})
	mux.HandleFunc("GET /v1/rules", func(w http.ResponseWriter, r *http.Request) { listRules(w, r, o.Engine.Config()) })
	mux.HandleFunc("GET /v1/keys", func(w http.ResponseWriter, r *http.Request) { listKeys(w, r, o) })
	mux.HandleFunc("GET /v1/keys/state", func(w http.ResponseWriter, r *http.Request) { keyState(w, r, o) })
	mux.HandleFunc("POST /v1/keys/reset", func(w http.ResponseWriter, r *http.Request) { resetKey(w, r, o) })
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		mux.HandleFunc(m+" /v1/limits", o.limits)
	}
	mountLive(mux, o)
	eps := slices.Clone(endpoints)
	if o.Gatherer == nil {
		eps = slices.DeleteFunc(eps, func(e Endpoint) bool { return e.Path == "/metrics" })
	}
	for _, e := range o.Extra {
		mux.Handle(e.Method+" "+e.Path, e.Handler)
		eps = append(eps, e.Endpoint)
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"endpoints": eps})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "no such admin endpoint"})
	})
	return nosniff(mux)
}

// nosniff marks every answer X-Content-Type-Options: nosniff, so that a
// browser runs as a script only what is served as one: the live page's
// policy admits any script of the admin listener ('self'), and JSON
// answers hold what clients sent.
func nosniff(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// Endpoint is one endpoint as GET / lists it.
type Endpoint struct {
	Method      string `json:"method"`
	Path        string `json:"path"`
	Description string `json:"description"`
}

// endpoints are what GET / lists, in the order of docs/running.md ("Admin").
var endpoints = []Endpoint{
	{"GET", "/", "this list"},
	{"GET", "/healthz", "liveness: 200 while the process serves"},
	{"GET", "/readyz", "readiness: ready, degraded (with reasons) or 503 draining"},
	{"GET", "/metrics", "Prometheus metrics"},
	{"GET", "/debug/pprof/", "Go's profiler"},
	{"GET", "/v1/config", "the config served: version, files, domains"},
	{"GET", "/v1/rules", "the rules served, a page at a time (?limit=, ?cursor=)"},
	{"GET", "/v1/keys", "the keys decided recently, a page at a time (?limit=, ?cursor=)"},
	{"GET", "/v1/keys/state", "one key (?key=, or ?domain= and ?entry=key=value) and the state of each of its limits; charges nothing"},
	{"POST", "/v1/keys/reset", "forgets one key's state under every limit of its rule, its plans' included"},
	{"GET", "/v1/limits", "one key's runtime limits (?key=, or ?domain= and ?entry=key=value), what its rule lets it set, and the limits its next check is decided under"},
	{"PUT", "/v1/limits", "gives one key its own rates, {\"rates\": {\"<limit>\": <rate or amount>}, \"by\": \"<who>\"}, within its rule's overrides; audited; needs the admin token"},
	{"DELETE", "/v1/limits", "takes one key's runtime limits away (?by=<who>); audited; needs the admin token"},
	{"GET", "/live", "a live page: decisions per second by rule and result over the last 15 minutes, denied keys, the store's health"},
	{"GET", "/live.json", "what the live page shows, as JSON"},
}

// RuleInfo is one rule as the admin API lists it.
type RuleInfo struct {
	Domain    string      `json:"domain"`
	Path      string      `json:"path"`
	Name      string      `json:"name,omitempty"`
	File      string      `json:"file"`
	Line      int         `json:"line"`
	Limits    []LimitInfo `json:"limits,omitempty"`
	Plans     []string    `json:"plans,omitempty"`
	Unlimited bool        `json:"unlimited,omitempty"`
	Shadow    bool        `json:"shadow,omitempty"`
}

// LimitInfo is one limit of a rule.
type LimitInfo struct {
	Name         string  `json:"name"`
	Algorithm    string  `json:"algorithm"`
	Rate         int64   `json:"rate"`
	Period       string  `json:"period"`
	Burst        int64   `json:"burst,omitempty"`
	ChargeDenied bool    `json:"charge_denied,omitempty"`
	PeriodSecs   float64 `json:"period_seconds"`
}

// listRules answers one page of rules in (domain, path) order, the rules
// of one path (such as "a_b" of key "a_b", and of key "a" with value "b")
// in file order. The cursor is opaque to clients; it holds the position
// of the last rule returned, so that a page after a reload goes on from
// the same place.
func listRules(w http.ResponseWriter, r *http.Request, c *rules.Config) {
	limit, after, ok := page(w, r)
	if !ok {
		return
	}
	var out []RuleInfo
	var last position
	next := ""
	for _, d := range c.Domains() {
		rs := append([]*rules.Rule(nil), d.Rules...)
		sortRules(rs)
		var pos position
		for i, rule := range rs {
			if i > 0 && rule.Path == rs[i-1].Path {
				pos.Seq++
			} else {
				pos = position{Domain: d.Name, Path: rule.Path}
			}
			if after != nil && pos.compare(*after) <= 0 {
				continue
			}
			if len(out) == limit {
				next = encodeCursor(last)
				break
			}
			out = append(out, info(rule))
			last = pos
		}
		if next != "" {
			break
		}
	}
	if out == nil {
		out = []RuleInfo{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"rules": out, "next_cursor": next})
}

// position is where a rule is listed: its domain, its path, and how many
// rules of the same path come before it. Paths alone are not unique.
type position struct {
	Domain string `json:"d"`
	Path   string `json:"p"`
	Seq    int    `json:"n"`
}

func (p position) compare(o position) int {
	if c := strings.Compare(p.Domain, o.Domain); c != 0 {
		return c
	}
	if c := strings.Compare(p.Path, o.Path); c != 0 {
		return c
	}
	return cmp.Compare(p.Seq, o.Seq)
}

func info(r *rules.Rule) RuleInfo {
	ri := RuleInfo{Domain: r.Domain, Path: r.Path, Name: r.Name, File: r.File, Line: r.Line, Unlimited: r.Unlimited, Shadow: r.Shadow}
	for _, l := range r.Limits {
		ri.Limits = append(ri.Limits, LimitInfo{
			Name: l.Name, Algorithm: l.Algorithm.String(), Rate: l.Rate, Period: rules.FormatDuration(l.Period),
			PeriodSecs: l.Period.Seconds(), Burst: l.Burst, ChargeDenied: l.ChargeDenied,
		})
	}
	for p := range r.Plans {
		ri.Plans = append(ri.Plans, p)
	}
	sortStrings(ri.Plans)
	return ri
}

// pageSize reads ?limit=, answering 400 if it is out of range.
func pageSize(w http.ResponseWriter, r *http.Request) (int, bool) {
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			writeError(w, http.StatusBadRequest, "invalid_request", "limit: want 1 to "+strconv.Itoa(MaxPageSize))
			return 0, false
		}
		return n, true
	}
	return DefaultPageSize, true
}

func page(w http.ResponseWriter, r *http.Request) (limit int, after *position, ok bool) {
	limit, ok = pageSize(w, r)
	if !ok {
		return 0, nil, false
	}
	if s := r.URL.Query().Get("cursor"); s != "" {
		after = decodeCursor(s)
		if after == nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "message": "cursor: not one this API gave"})
			return 0, nil, false
		}
	}
	return limit, after, true
}

// cursorTag starts every cursor; it changes when the format does.
const cursorTag = "r2:"

func encodeCursor(p position) string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(append([]byte(cursorTag), b...))
}

// decodeCursor returns the position a cursor holds, or nil if it is not
// one encodeCursor made.
func decodeCursor(s string) *position {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	rest, ok := bytes.CutPrefix(b, []byte(cursorTag))
	if !ok {
		return nil
	}
	var p position
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if dec.Decode(&p) != nil || dec.More() {
		return nil
	}
	return &p
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
