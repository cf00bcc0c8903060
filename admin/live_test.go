package admin_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

func TestLivePage(t *testing.T) {
	h, _ := liveHandler(t)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/live", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /live: got %d, want 200", w.Code)
	}
	for name, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'self'",
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := w.Header().Get(name); !strings.HasPrefix(got, want) {
			t.Errorf("%s: got %q, want it to start with %q", name, got, want)
		}
	}
	// The inline script and style run only if the policy names their hashes.
	csp := w.Header().Get("Content-Security-Policy")
	body := w.Body.String()
	for directive, tag := range map[string]string{"script-src": "script", "style-src": "style"} {
		_, rest, _ := strings.Cut(body, "<"+tag+">")
		inline, _, _ := strings.Cut(rest, "</"+tag+">")
		sum := sha256.Sum256([]byte(inline))
		if want := directive + " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy: got %q, want %q in it", csp, want)
		}
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "http://", "https://"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q; it builds its nodes with textContent and loads nothing from elsewhere", bad)
		}
	}
	if !strings.Contains(body, `fetch("live.json"`) {
		t.Errorf("the page does not fetch live.json")
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
