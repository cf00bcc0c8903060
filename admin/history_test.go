package admin_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/metrics"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// historyHandler is an admin handler over the edge domain whose history
// of o samples the engine's metrics; the test samples it.
func historyHandler(t *testing.T, o admin.HistoryOptions) (http.Handler, *rules.Engine, *admin.History, *metrics.Metrics) {
	t.Helper()
	e := keyEngine(t)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	e.Observe = m.Observe
	h := admin.NewHistory(reg, o)
	return admin.Handler(admin.Options{Engine: e, Gatherer: reg, History: h}), e, h, m
}

// chart is what the history says: each point's end, in seconds from
// storetest.Start, and each rule's points as "domain/rule result: v v".
func chart(t *testing.T, h http.Handler) (times []float64, points []string) {
	t.Helper()
	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)
	if v.History == nil {
		t.Fatal("/live.json: no history")
	}
	start := float64(storetest.Start.UnixMilli()) / 1000
	for _, at := range v.History.Times {
		times = append(times, at-start)
	}
	for _, r := range v.History.Rules {
		for result, vs := range r.Results {
			if len(vs) != len(v.History.Times) {
				t.Errorf("%s/%s %s: %d points, want one per time (%d)", r.Domain, r.Rule, result, len(vs), len(v.History.Times))
			}
			points = append(points, fmt.Sprintf("%s/%s %s: %s", r.Domain, r.Rule, result, strings.Trim(fmt.Sprint(vs), "[]")))
		}
	}
	slices.Sort(points)
	return times, points
}

// perSecond returns the per_second /live.json gives edge zone's result,
// or "null".
func perSecond(t *testing.T, h http.Handler, result string) string {
	t.Helper()
	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)
	for _, d := range v.Decisions {
		if d.Domain == "edge" && d.Rule == "zone" && d.Result == result {
			if d.PerSecond == nil {
				return "null"
			}
			return fmt.Sprint(*d.PerSecond)
		}
	}
	return "absent"
}

// The history turns the counters into decisions per second, one point
// per sample, over a window that slides: its first answer has them, and
// a rule with no decision left in the window goes.
func TestHistoryRates(t *testing.T) {
	h, e, hist, _ := historyHandler(t, admin.HistoryOptions{Every: 5 * time.Second, Window: 20 * time.Second})
	at := func(s int) time.Time { return storetest.Start.Add(time.Duration(s) * time.Second) }
	zone := func(v string) { hit(t, e, rules.Entry{Key: "zone", Value: v}) } // 1 a minute

	type step struct {
		do         func()
		sample     int // seconds from Start
		wantTimes  []float64
		wantPoints []string
	}
	steps := []step{
		{func() {}, 0, nil, nil},
		{func() { zone("a"); zone("a") }, 5, []float64{5}, []string{"edge/zone ok: 0.2", "edge/zone over_limit: 0.2"}},
		// 10 s to the next sample: one allowed is 0.1 a second.
		{func() { zone("b") }, 15, []float64{5, 15}, []string{"edge/zone ok: 0.2 0.1", "edge/zone over_limit: 0.2 0"}},
		// A sample no later than the last is ignored.
		{func() { zone("c") }, 15, []float64{5, 15}, []string{"edge/zone ok: 0.2 0.1", "edge/zone over_limit: 0.2 0"}},
		{func() {}, 10, []float64{5, 15}, []string{"edge/zone ok: 0.2 0.1", "edge/zone over_limit: 0.2 0"}},
		{func() {}, 20, []float64{5, 15, 20}, []string{"edge/zone ok: 0.2 0.1 0.2", "edge/zone over_limit: 0.2 0 0"}},
		{func() {}, 25, []float64{5, 15, 20, 25}, []string{"edge/zone ok: 0.2 0.1 0.2 0", "edge/zone over_limit: 0.2 0 0 0"}},
		// The window holds 4 points: the first goes, and with it the
		// last denial.
		{func() {}, 30, []float64{15, 20, 25, 30}, []string{"edge/zone ok: 0.1 0.2 0 0"}},
		{func() {}, 35, []float64{20, 25, 30, 35}, []string{"edge/zone ok: 0.2 0 0 0"}},
		{func() {}, 40, []float64{25, 30, 35, 40}, nil},
	}
	for i, s := range steps {
		s.do()
		hist.Sample(at(s.sample))
		times, points := chart(t, h)
		if fmt.Sprint(times) != fmt.Sprint(s.wantTimes) || fmt.Sprint(points) != fmt.Sprint(s.wantPoints) {
			t.Fatalf("step %d, sample at %d s:\ngot  times %v, points %q\nwant times %v, points %q", i, s.sample, times, points, s.wantTimes, s.wantPoints)
		}
	}
}

// The decisions' per_second is null until the history has two samples,
// and then the rate between the last two, from the first answer on.
func TestHistoryPerSecond(t *testing.T) {
	h, e, hist, _ := historyHandler(t, admin.HistoryOptions{})
	hit(t, e, rules.Entry{Key: "zone", Value: "a"})
	hist.Sample(storetest.Start)
	if got := perSecond(t, h, "ok"); got != "null" {
		t.Errorf("after one sample: got %s, want null", got)
	}
	for range 4 {
		hit(t, e, rules.Entry{Key: "zone", Value: "a"}) // denied: 1 a minute
	}
	hist.Sample(storetest.Start.Add(2 * time.Second))
	if got, want := perSecond(t, h, "over_limit"), "2"; got != want {
		t.Errorf("4 denials in 2 s: got %s a second, want %s", got, want)
	}
	if got, want := perSecond(t, h, "ok"), "0"; got != want {
		t.Errorf("no allowed in 2 s: got %s a second, want %s", got, want)
	}
}

// Past MaxRules, the decisions of the rules met later are added up under
// admin.OtherRules; the rates of the table still cover every rule.
func TestHistoryMaxRules(t *testing.T) {
	h, e, hist, _ := historyHandler(t, admin.HistoryOptions{Every: time.Second, MaxRules: 1})
	hist.Sample(storetest.Start)
	hit(t, e, rules.Entry{Key: "zone", Value: "a"})
	hit(t, e, rules.Entry{Key: "a_b", Value: "x"})
	hit(t, e, rules.Entry{Key: "internal", Value: "x"})
	hist.Sample(storetest.Start.Add(time.Second))
	_, points := chart(t, h)
	want := []string{"/" + admin.OtherRules + " ok: 1", "/" + admin.OtherRules + " unlimited: 1", "edge/a_b ok: 1"}
	if fmt.Sprint(points) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", points, want)
	}
	if got := perSecond(t, h, "ok"); got != "1" {
		t.Errorf("edge zone ok per second: got %s, want 1", got)
	}
}

// Degraded decisions are split into allowed and denied, and the denied
// ones count in the denied total; a shadow rule's would-be denials are
// marked, and not counted as denied.
func TestLiveDegradedAndShadow(t *testing.T) {
	c := config(t, nativeFile)
	e := rules.NewEngine(c, nil)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	hist := admin.NewHistory(reg, admin.HistoryOptions{Every: time.Second})
	h := admin.Handler(admin.Options{Engine: e, Gatherer: reg, History: hist})
	var user, writes *rules.Rule
	for _, r := range c.Domain("api").Rules {
		switch r.Name {
		case "per_user":
			user = r
		case "writes":
			writes = r
		}
	}
	limit := &rules.CurrentLimit{RequestsPerUnit: 2}
	observe := func(n int, st rules.Status) {
		for range n {
			m.Observe("api", &rules.Response{Statuses: []rules.Status{st}}, nil)
		}
	}
	hist.Sample(storetest.Start)
	observe(5, rules.Status{Code: rules.OK, Rule: user, Limit: limit})
	observe(3, rules.Status{Code: rules.OverLimit, Rule: user, Limit: limit})
	observe(4, rules.Status{Code: rules.OK, Rule: user, Limit: limit, Degraded: true})
	observe(2, rules.Status{Code: rules.OverLimit, Rule: user, Limit: limit, Degraded: true})
	observe(6, rules.Status{Code: rules.OK, Rule: writes, Limit: limit, Shadowed: true})
	hist.Sample(storetest.Start.Add(time.Second))

	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)
	if want := (admin.Totals{Decided: 20, Denied: 5, DegradedAllowed: 4, DegradedDenied: 2, Shadowed: 6}); v.Totals != want {
		t.Errorf("totals: got %+v, want %+v", v.Totals, want)
	}
	var got []string
	for _, d := range v.Decisions {
		got = append(got, fmt.Sprintf("%s %s shadow=%v %s %v", d.Rule, d.Path, d.Shadow, d.Result, d.Total))
	}
	want := []string{
		"per_user user shadow=false degraded_allowed 4",
		"per_user user shadow=false degraded_denied 2",
		"per_user user shadow=false ok 5",
		"per_user user shadow=false over_limit 3",
		"writes method_POST.route shadow=true shadowed 6",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("decisions:\ngot  %q\nwant %q", got, want)
	}
	var charted []string
	for _, r := range v.History.Rules {
		for result, vs := range r.Results {
			charted = append(charted, fmt.Sprintf("%s shadow=%v %s %v", r.Rule, r.Shadow, result, vs))
		}
	}
	slices.Sort(charted)
	wantCharted := []string{
		"per_user shadow=false degraded_allowed [4]", "per_user shadow=false degraded_denied [2]",
		"per_user shadow=false ok [5]", "per_user shadow=false over_limit [3]", "writes shadow=true shadowed [6]",
	}
	if fmt.Sprint(charted) != fmt.Sprint(wantCharted) {
		t.Errorf("history:\ngot  %q\nwant %q", charted, wantCharted)
	}
}

// A key of a shadow rule with nothing left is listed among the keys
// denied now, marked: its rule reports, it never denies.
func TestLiveDeniedKeysShadow(t *testing.T) {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(config(t, nativeFile), st)
	e.Keys = admin.NewKeyIndex(10)
	h := admin.Handler(admin.Options{Engine: e})
	for range 2 {
		resp, err := e.Decide(context.Background(), rules.Request{Domain: "api", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{
			{Key: "method", Value: "POST"}, {Key: "route", Value: "/orders"}}}}})
		if err != nil || resp.Code != rules.OK {
			t.Fatalf("a shadow rule's check: got %v, %v; want OK", resp.Code, err)
		}
	}
	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)
	if len(v.DeniedKeys) != 1 || !v.DeniedKeys[0].Shadow || v.DeniedKeys[0].Rule != "writes" {
		t.Errorf("denied_keys: got %+v, want the writes key, marked shadow", v.DeniedKeys)
	}
	if len(v.MostDenied) != 0 {
		t.Errorf("most_denied: got %+v, want none (a shadow rule denies nothing)", v.MostDenied)
	}
}

// Before the store first connects, the page lists the Redis nodes of
// the configuration, connecting; once connected, the store's own.
func TestLiveRedisNeverConnected(t *testing.T) {
	svc := &admin.Service{Command: "serve", Store: "redis cluster", StoreAddrs: []string{"10.0.0.2:6379", "10.0.0.1:6379"},
		Listeners: []admin.Listener{{Name: "grpc", Addr: "127.0.0.1:8081"}}, Started: time.Now().Add(-90 * time.Second)}
	reg := prometheus.NewRegistry()
	connected := prometheus.NewGauge(prometheus.GaugeOpts{Name: "bouncer_redis_connected", Help: "h"})
	open := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bouncer_redis_breaker_open", Help: "h"}, []string{"node"})
	reg.MustRegister(connected, open)

	for i, g := range []prometheus.Gatherer{nil, reg} {
		h := admin.Handler(admin.Options{Engine: keyEngine(t), Gatherer: g, Service: svc})
		var v admin.LiveView
		get(t, h, "/live.json", http.StatusOK, &v)
		want := []admin.RedisNode{{Node: "10.0.0.1:6379", Connecting: true}, {Node: "10.0.0.2:6379", Connecting: true}}
		if v.Redis == nil || v.Redis.Connected || !slices.Equal(v.Redis.Nodes, want) {
			t.Errorf("gatherer %d: redis: got %+v, want not connected, nodes %+v", i, v.Redis, want)
		}
		if v.Service == nil || v.Service.Store != "redis cluster" || len(v.Service.Listeners) != 1 {
			t.Errorf("service: got %+v, want %+v", v.Service, svc)
		}
		if v.UptimeSeconds < 90 || v.UptimeSeconds > 3600 {
			t.Errorf("uptime: got %v s, want 90 s or a little more", v.UptimeSeconds)
		}
	}

	connected.Set(1)
	open.WithLabelValues("10.0.0.7:6379").Set(0)
	var v admin.LiveView
	get(t, admin.Handler(admin.Options{Engine: keyEngine(t), Gatherer: reg, Service: svc}), "/live.json", http.StatusOK, &v)
	if want := []admin.RedisNode{{Node: "10.0.0.7:6379", Breaker: "closed"}}; v.Redis == nil || !v.Redis.Connected || !slices.Equal(v.Redis.Nodes, want) {
		t.Errorf("connected: redis: got %+v, want connected, nodes %+v", v.Redis, want)
	}
}

// Run samples until its context ends, and then returns.
func TestHistoryRunStops(t *testing.T) {
	hist := admin.NewHistory(prometheus.NewRegistry(), admin.HistoryOptions{Every: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		hist.Run(ctx)
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after its context ended")
	}
}

// counters is a collector of the two decision counters at values a test
// sets, so that it can read them between their increments.
type counters struct {
	decisions, denied *prometheus.Desc
	degraded, deniedN float64
}

func newCounters() *counters {
	return &counters{
		decisions: prometheus.NewDesc("bouncer_decisions_total", "h", []string{"domain", "rule", "result"}, nil),
		denied:    prometheus.NewDesc("bouncer_degraded_denied_total", "h", []string{"domain", "rule"}, nil),
	}
}

func (c *counters) Describe(ch chan<- *prometheus.Desc) { ch <- c.decisions; ch <- c.denied }

func (c *counters) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, c.degraded, "edge", "zone", "degraded")
	ch <- prometheus.MustNewConstMetric(c.denied, prometheus.CounterValue, c.deniedN, "edge", "zone")
}

// A degraded decision that denied is counted twice (degraded, then
// degraded and denied); a sample between the two sees it allowed for a
// moment. That costs one point one decision too high, never a spike
// (as a step back taken for a counter that started again would).
func TestHistoryDegradedBetweenIncrements(t *testing.T) {
	c := newCounters()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	hist := admin.NewHistory(reg, admin.HistoryOptions{Every: time.Second})
	h := admin.Handler(admin.Options{Engine: keyEngine(t), Gatherer: reg, History: hist})
	steps := []struct{ degraded, denied float64 }{
		{10, 10}, // every degraded decision so far denied
		{11, 10}, // read between the two increments of one more
		{11, 11},
		{12, 12},
	}
	for i, s := range steps {
		c.degraded, c.deniedN = s.degraded, s.denied
		hist.Sample(storetest.Start.Add(time.Duration(i) * time.Second))
	}
	_, points := chart(t, h)
	want := []string{"edge/zone degraded_allowed: 1 0 0", "edge/zone degraded_denied: 0 1 1"}
	if fmt.Sprint(points) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", points, want)
	}
	var v admin.LiveView
	get(t, h, "/live.json", http.StatusOK, &v)
	if len(v.Decisions) != 1 || v.Decisions[0].Result != "degraded_denied" || v.Decisions[0].Total != 12 {
		t.Errorf("decisions: got %+v, want degraded_denied 12 alone (no row of 0 allowed)", v.Decisions)
	}
}

// Options out of range take the defaults, or the bound.
func TestHistoryOptions(t *testing.T) {
	tests := []struct {
		name       string
		o          admin.HistoryOptions
		wantEvery  float64
		wantWindow float64
	}{
		{"zero", admin.HistoryOptions{}, 5, 900},
		{"negative", admin.HistoryOptions{Every: -time.Second, Window: -time.Hour, MaxRules: -1}, 5, 900},
		{"a window shorter than two samples", admin.HistoryOptions{Every: time.Minute, Window: time.Second}, 60, 120},
		{"too many points", admin.HistoryOptions{Every: time.Nanosecond, Window: time.Hour}, 1e-9, admin.MaxHistoryPoints * 1e-9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hist := admin.NewHistory(prometheus.NewRegistry(), tt.o)
			var v admin.LiveView
			get(t, admin.Handler(admin.Options{Engine: keyEngine(t), History: hist}), "/live.json", http.StatusOK, &v)
			if v.History == nil || v.History.EverySeconds != tt.wantEvery || math.Abs(v.History.WindowSeconds-tt.wantWindow) > 1e-12 {
				t.Errorf("got %+v, want every %v s, window %v s", v.History, tt.wantEvery, tt.wantWindow)
			}
		})
	}
}
