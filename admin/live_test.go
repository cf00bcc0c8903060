package admin_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/metrics"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// hostileKey is a descriptor value a client might send to a page that
// shows keys as markup.
const hostileKey = "<script>alert(1)</script>"

// liveHandler is an admin handler over the edge domain with metrics,
// after one check of zone=a and two of the hostile zone, the second
// denied (a limit of 1 a minute).
func liveHandler(t *testing.T) (http.Handler, *rules.Engine) {
	t.Helper()
	e := keyEngine(t)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.Serving(e.Config())
	e.Observe = m.Observe
	hit(t, e, rules.Entry{Key: "zone", Value: "a"})
	hit(t, e, rules.Entry{Key: "zone", Value: hostileKey})
	if resp := hit(t, e, rules.Entry{Key: "zone", Value: hostileKey}); resp.Code != rules.OverLimit {
		t.Fatalf("third check: got %v, want over limit", resp.Code)
	}
	return admin.Handler(admin.Options{Engine: e, Gatherer: reg}), e
}

// serveGet serves GET path and returns the answer, failing t unless it
// is 200.
func serveGet(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: got %d, want 200", path, w.Code)
	}
	return w
}

// The page and what it loads are the embedded files, each with its type,
// under a policy that runs and styles only what the admin listener
// serves; the page has nothing inline for that policy to refuse.
func TestLivePage(t *testing.T) {
	h, _ := liveHandler(t)
	page := serveGet(t, h, "/live")
	body := page.Body.String()
	assets := map[string]struct{ file, contentType string }{
		"/live":           {"live.html", "text/html; charset=utf-8"},
		"/live/live.js":   {"live.js", "text/javascript; charset=utf-8"},
		"/live/live.css":  {"live.css", "text/css; charset=utf-8"},
		"/live/uplot.js":  {"vendor/uplot/uPlot.iife.min.js", "text/javascript; charset=utf-8"},
		"/live/uplot.css": {"vendor/uplot/uPlot.min.css", "text/css; charset=utf-8"},
	}
	for path, a := range assets {
		w := serveGet(t, h, path)
		want, err := os.ReadFile(a.file)
		if err != nil {
			t.Fatal(err)
		}
		if w.Body.String() != string(want) {
			t.Errorf("GET %s: got %d bytes, want those of %s (%d)", path, w.Body.Len(), a.file, len(want))
		}
		for name, want := range map[string]string{
			"Content-Type":            a.contentType,
			"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
			"X-Content-Type-Options":  "nosniff",
		} {
			if got := w.Header().Get(name); got != want {
				t.Errorf("GET %s: %s: got %q, want %q", path, name, got, want)
			}
		}
		if a.file != "live.html" && !strings.Contains(body, `"`+strings.TrimPrefix(path, "/")+`"`) {
			t.Errorf("the page does not load %s", path)
		}
	}
	if inline := regexp.MustCompile(`<script>|<style|\sstyle=|\son[a-z]+=`).FindString(body); inline != "" {
		t.Errorf("the page holds %q: the policy admits no inline script or style", inline)
	}
	script := serveGet(t, h, "/live/live.js").Body.String()
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "http://", "https://", "eval("} {
		if strings.Contains(script, bad) {
			t.Errorf("the page's script holds %q; it builds its nodes with textContent and loads nothing from elsewhere", bad)
		}
	}
	if !strings.Contains(script, `fetch("live.json"`) {
		t.Errorf("the page's script does not fetch live.json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/live/nothing.js", nil))
	if w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("GET /live/nothing.js: got %d %q, want 404 application/json", w.Code, w.Header().Get("Content-Type"))
	}
}

// The vendored uPlot is the version, with the sums, that its README
// names.
func TestLiveVendoredUPlot(t *testing.T) {
	readme, err := os.ReadFile("vendor/uplot/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"uPlot.iife.min.js", "uPlot.min.css"} {
		b, err := os.ReadFile(filepath.Join("vendor/uplot", f))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("| %s | %x |", f, sha256.Sum256(b)); !strings.Contains(string(readme), want) {
			t.Errorf("vendor/uplot/README.md lacks %q", want)
		}
	}
	js, _ := os.ReadFile("vendor/uplot/uPlot.iife.min.js")
	version := regexp.MustCompile(`version (\d+\.\d+\.\d+)`).FindSubmatch(readme)
	if version == nil || !strings.HasPrefix(string(js), "/*! https://github.com/leeoniya/uPlot (v"+string(version[1])+")") {
		t.Errorf("uPlot.iife.min.js does not start with the version the README names (%s)", version)
	}
	if _, err := os.Stat("vendor/uplot/LICENSE"); err != nil {
		t.Errorf("uPlot's license: %v", err)
	}
}

func TestLiveJSON(t *testing.T) {
	h, e := liveHandler(t)
	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)

	if v.ConfigVersion != e.Config().Version {
		t.Errorf("config_version: got %q, want %q", v.ConfigVersion, e.Config().Version)
	}
	totals := map[string]float64{}
	for _, d := range v.Decisions {
		if d.Domain == "edge" && d.Rule == "zone" {
			totals[d.Result] += d.Total
		}
	}
	if totals["ok"] != 2 || totals["over_limit"] != 1 {
		t.Errorf("edge zone decisions: got %v, want ok 2 and over_limit 1", totals)
	}
	if want := (admin.Totals{Decided: 3, Denied: 1}); v.Totals != want {
		t.Errorf("totals: got %+v, want %+v", v.Totals, want)
	}
	// Both keys have nothing left; the one seen last comes first.
	if len(v.DeniedKeys) != 2 || v.DeniedKeys[0].Key != "edge:zone:"+hostileKey || v.DeniedKeys[1].Key != "edge:zone:a" {
		t.Fatalf("denied_keys: got %+v, want the hostile key, then zone a", v.DeniedKeys)
	}
	if d := v.DeniedKeys[0]; d.Domain != "edge" || d.Rule != "zone" || d.Rate != 1 || d.PeriodSeconds != 60 {
		t.Errorf("denied key: got %+v, want domain edge, rule zone, 1 per 60 s", d)
	}
	// One request was over the limit: its key is the most denied.
	if len(v.MostDenied) != 1 || v.MostDenied[0].Denied != 1 || v.MostDenied[0].Rule != "zone" || v.MostDenied[0].Domain != "edge" {
		t.Errorf("most_denied: got %+v, want one key of edge zone, denied once", v.MostDenied)
	}
	if v.Redis != nil {
		t.Errorf("redis: got %+v, want none with the memory store", v.Redis)
	}
	if v.ReloadHistory == nil || len(v.ReloadHistory) != 0 {
		t.Errorf("reload_history: got %+v, want [] (no reloader)", v.ReloadHistory)
	}

	// The key is data: JSON-escaped, never raw markup in the answer.
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/live.json", nil))
	if strings.Contains(w.Body.String(), hostileKey) {
		t.Errorf("/live.json holds the key as raw markup: %s", w.Body)
	}
	var raw map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"time", "config_version", "decisions", "most_denied", "denied_keys", "reloads", "reload_history"} {
		if _, ok := raw[field]; !ok {
			t.Errorf("/live.json: no %q field in %s", field, w.Body)
		}
	}
}

// The live page lists the reloader's own history, whenever the page was
// first opened: each attempt with its time, result, the version served
// after it, and a rejected one's problems.
func TestLiveReloadHistory(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(envoyFile)
	first, err := rules.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := rules.NewEngine(first, nil)
	clock := storetest.NewClock(storetest.Start)
	r := &rules.Reloader{Path: dir, Engine: e, Now: clock.Now}
	h := admin.Handler(admin.Options{Engine: e, Reloads: r.History})
	steps := []string{envoyFile, "domain: [\n", envoyFile, nativeFile}
	for _, body := range steps {
		write(body)
		_ = r.Reload()
		clock.Advance(time.Second)
	}
	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)
	var got []string
	for _, ev := range v.ReloadHistory {
		got = append(got, fmt.Sprintf("%s %s %s %d", ev.Time.Sub(storetest.Start), ev.Result, ev.Version, len(ev.Problems)))
	}
	second := e.Config().Version
	want := []string{
		"0s unchanged " + first.Version + " 0",
		"1s rejected " + first.Version + " 1",
		"2s restored " + first.Version + " 0",
		"3s reloaded " + second + " 0",
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("reload_history:\ngot  %q\nwant %q", got, want)
	}
	if ev := v.ReloadHistory[1]; !strings.Contains(ev.Problems[0], "c.yaml:") || ev.Message != rules.Rejected.String() {
		t.Errorf("the rejected attempt: got %+v, want its problem at c.yaml:line and the reloader's message", ev)
	}
}

func TestLiveWithoutKeyIndex(t *testing.T) {
	e := rules.NewEngine(config(t, envoyFile), nil)
	h := admin.Handler(admin.Options{Engine: e})
	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)
	if !v.KeysOff || len(v.DeniedKeys) != 0 || v.Decisions == nil {
		t.Errorf("got keys_off %v, denied_keys %v, decisions %v; want keys off, none denied, decisions []", v.KeysOff, v.DeniedKeys, v.Decisions)
	}
}

func TestLiveRedisBreakers(t *testing.T) {
	reg := prometheus.NewRegistry()
	connected := prometheus.NewGauge(prometheus.GaugeOpts{Name: "bouncer_redis_connected", Help: "h"})
	open := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bouncer_redis_breaker_open", Help: "h"}, []string{"node"})
	slow := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bouncer_redis_node_slow", Help: "h"}, []string{"node"})
	reg.MustRegister(connected, open, slow)
	connected.Set(1)
	for node, v := range map[string]float64{"10.0.0.3:6379": 0.5, "10.0.0.1:6379": 0, "10.0.0.2:6379": 1} {
		open.WithLabelValues(node).Set(v)
		slow.WithLabelValues(node).Set(0)
	}
	slow.WithLabelValues("10.0.0.1:6379").Set(1)

	h := admin.Handler(admin.Options{Engine: keyEngine(t), Gatherer: reg})
	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)
	want := &admin.RedisHealth{Connected: true, Nodes: []admin.RedisNode{
		{Node: "10.0.0.1:6379", Breaker: "closed", Slow: true},
		{Node: "10.0.0.2:6379", Breaker: "open"},
		{Node: "10.0.0.3:6379", Breaker: "half_open"},
	}}
	if v.Redis == nil || v.Redis.Connected != want.Connected || !slices.Equal(v.Redis.Nodes, want.Nodes) {
		t.Errorf("redis: got %+v, want %+v", v.Redis, want)
	}
}

// The live view carries the hybrid limiter's counters when its metrics
// are there, and none when they are not.
func TestLiveHybrid(t *testing.T) {
	reg := prometheus.NewRegistry()
	leases := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bouncer_hybrid_leases_total", Help: "h"}, []string{"event"})
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bouncer_hybrid_decisions_total", Help: "h"}, []string{"mode"})
	parked := prometheus.NewGauge(prometheus.GaugeOpts{Name: "bouncer_hybrid_units_parked", Help: "h"})
	hits := prometheus.NewCounter(prometheus.CounterOpts{Name: "bouncer_hybrid_cache_hits_total", Help: "h"})
	reg.MustRegister(leases, decisions, parked, hits)
	leases.WithLabelValues("taken").Add(7)
	leases.WithLabelValues("expired").Add(2)
	decisions.WithLabelValues("lease").Add(40)
	decisions.WithLabelValues("strict").Add(3)
	parked.Set(12)
	hits.Add(5)

	h := admin.Handler(admin.Options{Engine: keyEngine(t), Gatherer: reg})
	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)
	want := admin.HybridStats{
		Leases: map[string]float64{"taken": 7, "expired": 2}, Decisions: map[string]float64{"lease": 40, "strict": 3},
		UnitsParked: 12, CacheHits: 5,
	}
	if v.Hybrid == nil || !maps.Equal(v.Hybrid.Leases, want.Leases) || !maps.Equal(v.Hybrid.Decisions, want.Decisions) ||
		v.Hybrid.UnitsParked != want.UnitsParked || v.Hybrid.CacheHits != want.CacheHits {
		t.Errorf("hybrid: got %+v, want %+v", v.Hybrid, want)
	}

	var none admin.LiveView
	get(t, admin.Handler(admin.Options{Engine: keyEngine(t), Gatherer: prometheus.NewRegistry()}), "/live.json", http.StatusOK, &none)
	if none.Hybrid != nil {
		t.Errorf("without hybrid metrics: got %+v, want none", none.Hybrid)
	}
}
