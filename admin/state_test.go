package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// stateFile has one rule per algorithm family whose retry time a peek
// does not tell, and a plan with a limit of its own.
const stateFile = `domain: s
plans: {key: plan}
rules:
  - name: fixed
    match: [{key: fixed}]
    algorithm: fixed_window
    limits: [{name: per_minute, rate: 1, period: 1m}]
  - name: bucket
    match: [{key: bucket}]
    algorithm: token_bucket
    limits: [{name: per_minute, rate: 1, period: 1m, burst: 1}]
  - name: log
    match: [{key: log}]
    algorithm: sliding_window_log
    limits: [{name: per_hour, rate: 1, period: 1h}]
  - name: user
    match: [{key: user}]
    algorithm: fixed_window
    limits: [{name: per_day, rate: 1000, period: 24h}]
    plans:
      pro: {limits: [{name: per_day, rate: 100000, period: 1d}, {name: per_second, rate: 50, period: 1s}]}
`

// server serves the admin API over real HTTP for an engine of cfg on a
// memory store and a fake clock at 00:00:39 of a day.
func server(t *testing.T, cfg ...string) (*httptest.Server, *rules.Engine, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(storetest.Start.Add(39 * time.Second))
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(config(t, cfg...), st)
	e.Now = clock.Now
	e.Keys = admin.NewKeyIndex(100)
	srv := httptest.NewServer(admin.Handler(admin.Options{Engine: e, Gatherer: prometheus.NewRegistry()}))
	t.Cleanup(srv.Close)
	return srv, e, clock
}

// fetch sends one request to srv and decodes its JSON answer into out.
func fetch(t *testing.T, srv *httptest.Server, method, path string, wantStatus int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s %s: got %d %s, want %d", method, path, resp.StatusCode, body, wantStatus)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, body)
	}
}

func decideS(t *testing.T, e *rules.Engine, entries ...string) rules.Response {
	t.Helper()
	var d rules.Descriptor
	for i := 0; i < len(entries); i += 2 {
		d.Entries = append(d.Entries, rules.Entry{Key: entries[i], Value: entries[i+1]})
	}
	resp, err := e.Decide(context.Background(), rules.Request{Domain: "s", Descriptors: []rules.Descriptor{d}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The state of a spent limit says when the next request passes, as the
// next check answers it, and charges nothing in finding out; durations
// read as the config writes them.
func TestKeyStateRetryAfter(t *testing.T) {
	tests := []struct {
		name  string
		entry string
		want  admin.LimitStatus
	}{
		{"fixed window", "fixed", admin.LimitStatus{
			Name: "per_minute", Algorithm: "fixed_window", Rate: 1, Period: "1m", PeriodSeconds: 60,
			ResetAfter: "21s", ResetAfterSeconds: 21, RetryAfter: "21s", RetryAfterSeconds: 21,
		}},
		{"token bucket", "bucket", admin.LimitStatus{
			Name: "per_minute", Algorithm: "token_bucket", Rate: 1, Period: "1m", PeriodSeconds: 60, Burst: 1,
			ResetAfter: "1m", ResetAfterSeconds: 60, RetryAfter: "1m", RetryAfterSeconds: 60,
		}},
		{"sliding window log", "log", admin.LimitStatus{
			Name: "per_hour", Algorithm: "sliding_window_log", Rate: 1, Period: "1h", PeriodSeconds: 3600,
			ResetAfter: "1h", ResetAfterSeconds: 3600, RetryAfter: "1h", RetryAfterSeconds: 3600,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, e, clock := server(t, stateFile)
			if resp := decideS(t, e, tt.entry, "k"); resp.Code != rules.OK {
				t.Fatalf("first request: got %v, want OK", resp.Code)
			}
			path := "/v1/keys/state?domain=s&entry=" + url.QueryEscape(tt.entry+"=k")
			for range 2 { // the second look finds what the first did: it charged nothing
				var v admin.KeyView
				fetch(t, srv, http.MethodGet, path, http.StatusOK, &v)
				if len(v.Limits) != 1 {
					t.Fatalf("got %d limits, want 1", len(v.Limits))
				}
				if got := v.Limits[0]; got != tt.want {
					t.Errorf("state:\ngot  %+v\nwant %+v", got, tt.want)
				}
			}
			resp := decideS(t, e, tt.entry, "k")
			if got, want := resp.Statuses[0].RetryAfter, time.Duration(tt.want.RetryAfterSeconds)*time.Second; resp.Code != rules.OverLimit || got != want {
				t.Errorf("next request: got %v, retry after %v; want OVER_LIMIT, retry after %v", resp.Code, got, want)
			}
			clock.Advance(time.Duration(tt.want.RetryAfterSeconds) * time.Second)
			if resp := decideS(t, e, tt.entry, "k"); resp.Code != rules.OK {
				t.Errorf("a request after retry_after: got %v, want OK", resp.Code)
			}
		})
	}
}

// A reset forgets every limit the key has, its plans' included, however
// the key is named; the answer counts them.
func TestKeyResetPlans(t *testing.T) {
	tests := []struct {
		name, reset string
	}{
		{"by descriptor without the plan", "domain=s&entry=user=alice"},
		{"by descriptor with the plan", "domain=s&entry=user=alice&entry=plan=pro"},
		{"by key", "key=" + url.QueryEscape("s:user:alice")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, e, _ := server(t, stateFile)
			decideS(t, e, "user", "alice") // the rule's own per_day
			decideS(t, e, "user", "alice", "plan", "pro")
			remaining := func(query string) map[string]int64 {
				t.Helper()
				var v admin.KeyView
				fetch(t, srv, http.MethodGet, "/v1/keys/state?"+query, http.StatusOK, &v)
				out := map[string]int64{}
				for _, l := range v.Limits {
					out[l.Period+" "+l.Name] = l.Remaining
				}
				return out
			}
			pro, free := "domain=s&entry=user=alice&entry=plan=pro", "domain=s&entry=user=alice"
			if got, want := remaining(pro), map[string]int64{"1d per_day": 99999, "1s per_second": 49}; !maps.Equal(got, want) {
				t.Fatalf("pro before the reset: got %v, want %v", got, want)
			}
			var ans struct {
				Reset  string `json:"reset"`
				Limits int    `json:"limits"`
			}
			fetch(t, srv, http.MethodPost, "/v1/keys/reset?"+tt.reset, http.StatusOK, &ans)
			if ans.Reset != "s:user:alice" || ans.Limits != 3 {
				t.Errorf("reset answer: got %+v, want s:user:alice and 3 limits", ans)
			}
			if got, want := remaining(pro), map[string]int64{"1d per_day": 100000, "1s per_second": 50}; !maps.Equal(got, want) {
				t.Errorf("pro after the reset: got %v, want %v", got, want)
			}
			if got, want := remaining(free), map[string]int64{"1d per_day": 1000}; !maps.Equal(got, want) {
				t.Errorf("the rule's own after the reset: got %v, want %v", got, want)
			}
		})
	}
}

func TestIndexListsEndpoints(t *testing.T) {
	srv, _, _ := server(t, stateFile)
	var got struct {
		Endpoints []admin.Endpoint `json:"endpoints"`
	}
	fetch(t, srv, http.MethodGet, "/", http.StatusOK, &got)
	var paths []string
	for _, ep := range got.Endpoints {
		paths = append(paths, ep.Method+" "+ep.Path)
		if ep.Description == "" {
			t.Errorf("%s %s: no description", ep.Method, ep.Path)
		}
	}
	want := []string{
		"GET /", "GET /healthz", "GET /readyz", "GET /metrics", "GET /debug/pprof/",
		"GET /v1/config", "GET /v1/rules", "GET /v1/keys", "GET /v1/keys/state", "POST /v1/keys/reset",
		"GET /v1/limits", "PUT /v1/limits", "DELETE /v1/limits",
		"GET /live", "GET /live.json",
	}
	if !slices.Equal(paths, want) {
		t.Errorf("endpoints: got %q, want %q", paths, want)
	}
	// Every one listed answers (a POST with a key to reset); a change of
	// runtime limits without a body, with the error it is.
	for _, ep := range got.Endpoints {
		path := ep.Path
		switch path {
		case "/v1/keys/state", "/v1/keys/reset", "/v1/limits":
			path += "?domain=s&entry=user=alice"
		}
		want := http.StatusOK
		if ep.Path == "/v1/limits" && ep.Method != http.MethodGet {
			want = http.StatusForbidden // the admin API has no token: credentials_required
		}
		req, _ := http.NewRequest(ep.Method, srv.URL+path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s %s: got %d, want %d", ep.Method, path, resp.StatusCode, want)
		}
	}
	var nf map[string]string
	fetch(t, srv, http.MethodGet, "/nope", http.StatusNotFound, &nf)
	if nf["error"] != "not_found" {
		t.Errorf("GET /nope: got %v, want not_found", nf)
	}
}

// Rules list their periods as the config writes them.
func TestRulePeriodsAsWritten(t *testing.T) {
	srv, _, _ := server(t, stateFile)
	var p rulesPage
	fetch(t, srv, http.MethodGet, "/v1/rules", http.StatusOK, &p)
	got := map[string]string{}
	for _, r := range p.Rules {
		for _, l := range r.Limits {
			got[r.Name+"/"+l.Name] = l.Period
		}
	}
	want := map[string]string{"fixed/per_minute": "1m", "bucket/per_minute": "1m", "log/per_hour": "1h", "user/per_day": "1d"}
	if !maps.Equal(got, want) {
		t.Errorf("periods: got %v, want %v", got, want)
	}
}

// A key counted under a request's override shows the override's rate and
// what is left of it, as the next request with that override is judged.
func TestKeyStateOfAnOverride(t *testing.T) {
	srv, e, _ := server(t, "domain: s\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n")
	d := rules.Descriptor{Entries: []rules.Entry{{Key: "user", Value: "o"}}, Limit: &rules.Override{RequestsPerUnit: 3, Unit: rules.UnitMinute}}
	for range 2 {
		if _, err := e.Decide(t.Context(), rules.Request{Domain: "s", Descriptors: []rules.Descriptor{d}}); err != nil {
			t.Fatal(err)
		}
	}
	var page struct{ Keys []admin.KeyView }
	fetch(t, srv, http.MethodGet, "/v1/keys", http.StatusOK, &page)
	if len(page.Keys) != 1 {
		t.Fatalf("got %d keys, want 1", len(page.Keys))
	}
	var v admin.KeyView
	fetch(t, srv, http.MethodGet, "/v1/keys/state?key="+url.QueryEscape(page.Keys[0].Key), http.StatusOK, &v)
	want := admin.LimitStatus{
		Name: "per_minute", Algorithm: "fixed_window", Rate: 3, Period: "1m", PeriodSeconds: 60,
		Override: true, Remaining: 1, ResetAfter: "21s", ResetAfterSeconds: 21,
	}
	if len(v.Limits) != 1 || v.Limits[0] != want {
		t.Errorf("state:\ngot  %+v\nwant %+v", v.Limits, want)
	}
}

// A config rule of envoy semantics, whose count is kept per unit window
// and shared with overrides, shows its own rate and name, found by key or
// by descriptor, and reads the hits an override on its entries counted.
func TestKeyStateOfASharedCount(t *testing.T) {
	srv, e, _ := server(t, "domain: s\ndescriptors:\n  - key: user\n    rate_limit: {name: users, unit: minute, requests_per_unit: 10}\n")
	plain := rules.Descriptor{Entries: []rules.Entry{{Key: "user", Value: "p"}}}
	over := plain
	over.Limit = &rules.Override{RequestsPerUnit: 3, Unit: rules.UnitMinute}
	for _, d := range []rules.Descriptor{plain, over, plain} {
		if _, err := e.Decide(t.Context(), rules.Request{Domain: "s", Descriptors: []rules.Descriptor{d}}); err != nil {
			t.Fatal(err)
		}
	}
	want := admin.LimitStatus{
		Name: "users", Algorithm: "fixed_window", Rate: 10, Period: "1m", PeriodSeconds: 60,
		Remaining: 7, ResetAfter: "21s", ResetAfterSeconds: 21,
	}
	var page struct{ Keys []admin.KeyView }
	fetch(t, srv, http.MethodGet, "/v1/keys", http.StatusOK, &page)
	if len(page.Keys) != 1 {
		t.Fatalf("got %d keys, want 1 (the override and the rule share it)", len(page.Keys))
	}
	for _, q := range []string{"key=" + url.QueryEscape(page.Keys[0].Key), "domain=s&entry=user=p"} {
		var v admin.KeyView
		fetch(t, srv, http.MethodGet, "/v1/keys/state?"+q, http.StatusOK, &v)
		if len(v.Limits) != 1 || v.Limits[0] != want {
			t.Errorf("state by %s:\ngot  %+v\nwant %+v", q, v.Limits, want)
		}
	}
}
