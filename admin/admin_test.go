package admin_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/rules"
)

// Two domains; in edge, the paths of "a_b" (any value) and "a" with value
// "b" are both "a_b", as envoyproxy/ratelimit names them.
const (
	nativeFile = `domain: api
plans: {key: plan}
rules:
  - name: per_user
    match: [{key: user}]
    limits:
      - {name: per_second, rate: 2, period: 1s, burst: 4}
    plans:
      pro: {limits: [{rate: 10, period: 1s}]}
      free: {unlimited: true}
  - name: writes
    shadow: true
    match: [{key: method, value: POST}, {key: route}]
    limits: [{rate: 1, period: 10s, algorithm: gcra}]
`
	envoyFile = `domain: edge
descriptors:
  - key: zone
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: a_b
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: a
    value: b
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: internal
    rate_limit: {unlimited: true}
`
)

// config loads files as one config; they are named f0.yaml, f1.yaml, ….
func config(t *testing.T, files ...string) *rules.Config {
	t.Helper()
	dir := t.TempDir()
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)+".yaml"), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := rules.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get serves one request and decodes the JSON answer into out.
func get(t *testing.T, h http.Handler, path string, wantStatus int, out any) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	if w.Code != wantStatus {
		t.Fatalf("GET %s: got %d %s, want %d", path, w.Code, w.Body, wantStatus)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type: got %q, want application/json", path, ct)
	}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, w.Body)
	}
}

type rulesPage struct {
	Rules      []admin.RuleInfo `json:"rules"`
	NextCursor string           `json:"next_cursor"`
}

// walk lists every rule, limit at a time, and returns them as "domain
// path line".
func walk(t *testing.T, h http.Handler, limit int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatalf("still paging after %d pages", page)
		}
		var p rulesPage
		get(t, h, "/v1/rules?limit="+strconv.Itoa(limit)+"&cursor="+cursor, http.StatusOK, &p)
		if len(p.Rules) > limit || len(p.Rules) == 0 && page > 0 {
			t.Fatalf("page %d: got %d rules, want 1 to %d", page, len(p.Rules), limit)
		}
		for _, r := range p.Rules {
			got = append(got, r.Domain+" "+r.Path+" "+strconv.Itoa(r.Line))
		}
		if p.NextCursor == "" {
			return got
		}
		cursor = p.NextCursor
	}
}

func TestRulesPagination(t *testing.T) {
	e := rules.NewEngine(config(t, envoyFile, nativeFile), nil)
	h := admin.Handler(admin.Options{Engine: e})
	// In (domain, path) order; rules of one path in file order.
	want := []string{
		"api method_POST.route 11",
		"api user 4",
		"edge a_b 6",
		"edge a_b 9",
		"edge internal 11",
		"edge zone 4",
	}
	for _, limit := range []int{1, 2, 3, 5, 6, 100} {
		t.Run("limit="+strconv.Itoa(limit), func(t *testing.T) {
			if got := walk(t, h, limit); !slices.Equal(got, want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	t.Run("default page", func(t *testing.T) {
		var p rulesPage
		get(t, h, "/v1/rules", http.StatusOK, &p)
		if len(p.Rules) != len(want) || p.NextCursor != "" {
			t.Errorf("got %d rules and cursor %q, want %d and none", len(p.Rules), p.NextCursor, len(want))
		}
	})
}

// A cursor is a position, so that paging across a reload goes on from
// where it was: no rule is listed twice, and a rule added after the
// position is listed.
func TestRulesCursorAcrossReload(t *testing.T) {
	e := rules.NewEngine(config(t, envoyFile), nil)
	h := admin.Handler(admin.Options{Engine: e})
	var p rulesPage
	get(t, h, "/v1/rules?limit=2", http.StatusOK, &p)
	if len(p.Rules) != 2 || p.Rules[1].Path != "a_b" || p.NextCursor == "" {
		t.Fatalf("first page: got %+v, want 2 rules ending with a_b, and a cursor", p)
	}
	grown := strings.Replace(envoyFile, "domain: edge\ndescriptors:\n",
		"domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1}\n  - key: y\n    rate_limit: {unit: hour, requests_per_unit: 1}\n", 1)
	e.Swap(config(t, grown))
	var rest []string
	for cursor := p.NextCursor; cursor != ""; cursor = p.NextCursor {
		p = rulesPage{}
		get(t, h, "/v1/rules?limit=1&cursor="+cursor, http.StatusOK, &p)
		for _, r := range p.Rules {
			rest = append(rest, r.Path)
		}
	}
	if want := []string{"internal", "y", "zone"}; !slices.Equal(rest, want) {
		t.Errorf("after the reload: got %q, want %q", rest, want)
	}
}

func TestRulesBadPaging(t *testing.T) {
	h := admin.Handler(admin.Options{Engine: rules.NewEngine(config(t, envoyFile), nil)})
	tests := []struct{ name, query string }{
		{"limit 0", "limit=0"},
		{"limit above the maximum", "limit=" + strconv.Itoa(admin.MaxPageSize+1)},
		{"limit not a number", "limit=ten"},
		{"cursor not base64", "cursor=%25%25"},
		{"cursor not ours", "cursor=" + base64.RawURLEncoding.EncodeToString([]byte("page 2"))},
		{"cursor of another version", "cursor=" + base64.RawURLEncoding.EncodeToString([]byte("r1:edge\x00zone"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out map[string]string
			get(t, h, "/v1/rules?"+tt.query, http.StatusBadRequest, &out)
			if out["error"] != "invalid_request" || out["message"] == "" {
				t.Errorf("got %v, want error invalid_request and a message", out)
			}
		})
	}
}

func TestRuleInfo(t *testing.T) {
	h := admin.Handler(admin.Options{Engine: rules.NewEngine(config(t, nativeFile, envoyFile), nil)})
	var p rulesPage
	get(t, h, "/v1/rules", http.StatusOK, &p)
	byPath := map[string]admin.RuleInfo{}
	for _, r := range p.Rules {
		byPath[r.Domain+" "+r.Path] = r
	}
	user := byPath["api user"]
	if user.Name != "per_user" || filepath.Base(user.File) != "f0.yaml" || user.Line != 4 {
		t.Errorf("per_user: got name %q at %s:%d, want per_user at f0.yaml:4", user.Name, user.File, user.Line)
	}
	wantLimit := admin.LimitInfo{Name: "per_second", Algorithm: "token_bucket", Rate: 2, Period: "1s", Burst: 4, PeriodSecs: 1}
	if len(user.Limits) != 1 || user.Limits[0] != wantLimit {
		t.Errorf("per_user limits: got %+v, want [%+v]", user.Limits, wantLimit)
	}
	if want := []string{"free", "pro"}; !slices.Equal(user.Plans, want) {
		t.Errorf("per_user plans: got %q, want %q", user.Plans, want)
	}
	if !byPath["api method_POST.route"].Shadow {
		t.Errorf("writes: got shadow false, want true")
	}
	if r := byPath["edge internal"]; !r.Unlimited || len(r.Limits) != 0 {
		t.Errorf("internal: got %+v, want unlimited without limits", r)
	}
	if l := byPath["edge zone"].Limits; len(l) != 1 || l[0].Name != "per_minute" || l[0].Algorithm != "fixed_window" || !l[0].ChargeDenied || l[0].PeriodSecs != 60 {
		t.Errorf("zone limits: got %+v, want per_minute fixed_window charging denied hits, 60 s", l)
	}
}

func TestEndpoints(t *testing.T) {
	c := config(t, nativeFile, envoyFile)
	e := rules.NewEngine(c, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "A counter."}))
	ready := true
	h := admin.Handler(admin.Options{Engine: e, Gatherer: reg, Ready: func() bool { return ready }})
	bare := admin.Handler(admin.Options{Engine: e})
	degraded := admin.Handler(admin.Options{Engine: e, Ready: func() bool { return ready }, Degraded: func() []string {
		return []string{"redis node 10.0.0.1:6379: circuit breaker open"}
	}})
	healthy := admin.Handler(admin.Options{Engine: e, Degraded: func() []string { return nil }})
	tests := []struct {
		name       string
		h          http.Handler
		ready      bool
		path       string
		wantStatus int
		wantBody   string // a substring
	}{
		{"healthz", h, true, "/healthz", 200, `"status":"ok"`},
		{"healthz while draining", h, false, "/healthz", 200, `"status":"ok"`},
		{"readyz", h, true, "/readyz", 200, `"config_version":"` + c.Version + `"`},
		{"readyz while draining", h, false, "/readyz", 503, `"status":"draining"`},
		{"readyz without Ready", bare, false, "/readyz", 200, `"status":"ready"`},
		{"readyz degraded", degraded, true, "/readyz", 200, `"reasons":["redis node 10.0.0.1:6379: circuit breaker open"],"status":"degraded"}`},
		{"readyz degraded while draining", degraded, false, "/readyz", 503, `"status":"draining"`},
		{"readyz not degraded", healthy, true, "/readyz", 200, `"status":"ready"`},
		{"healthz degraded", degraded, true, "/healthz", 200, `"status":"ok"`},
		{"metrics", h, true, "/metrics", 200, "test_total 0"},
		{"metrics without a gatherer", bare, true, "/metrics", 404, `"error":"not_found"`},
		{"config", h, true, "/v1/config", 200, `"version":"` + c.Version + `"`},
		{"config domains", h, true, "/v1/config", 200, `"name":"edge","rules":4,"semantics":"envoy"}`},
		{"pprof", h, true, "/debug/pprof/", 200, "goroutine"},
		{"unknown", h, true, "/nope", 404, `"error":"not_found"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready = tt.ready
			w := httptest.NewRecorder()
			tt.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if w.Code != tt.wantStatus {
				t.Errorf("status: got %d, want %d", w.Code, tt.wantStatus)
			}
			if !strings.Contains(w.Body.String(), tt.wantBody) {
				t.Errorf("body: got %s, want it to contain %s", w.Body, tt.wantBody)
			}
		})
	}
}
