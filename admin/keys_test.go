package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

type keysPage struct {
	Keys       []admin.KeyView `json:"keys"`
	NextCursor string          `json:"next_cursor"`
}

func keyEngine(t *testing.T) *rules.Engine {
	t.Helper()
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(config(t, envoyFile), st)
	e.Keys = admin.NewKeyIndex(100)
	return e
}

func hit(t *testing.T, e *rules.Engine, entries ...rules.Entry) rules.Response {
	t.Helper()
	resp, err := e.Decide(context.Background(), rules.Request{Domain: "edge", Descriptors: []rules.Descriptor{{Entries: entries}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func post(t *testing.T, h http.Handler, path string, wantStatus int) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
	if w.Code != wantStatus {
		t.Fatalf("POST %s: got %d %s, want %d", path, w.Code, w.Body, wantStatus)
	}
}

func TestKeysListStateReset(t *testing.T) {
	e := keyEngine(t)
	h := admin.Handler(admin.Options{Engine: e})
	zones := []string{"z1", "z2", "z3"}
	for _, z := range zones {
		hit(t, e, rules.Entry{Key: "zone", Value: z})
	}
	hit(t, e, rules.Entry{Key: "zone", Value: "z1"}) // z1 is now over its 1 a minute

	// Every key exactly once, a page at a time.
	var all []admin.KeyView
	cursor := ""
	for range 10 {
		var p keysPage
		get(t, h, "/v1/keys?limit=2&cursor="+url.QueryEscape(cursor), http.StatusOK, &p)
		all = append(all, p.Keys...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != 3 {
		t.Fatalf("listed %d keys, want 3", len(all))
	}
	for i, k := range all {
		if k.Domain != "edge" || k.Rule != "zone" || len(k.Entries) != 1 || k.Entries[0].Value != zones[i] {
			t.Errorf("key %d: got %+v, want zone %s of edge", i, k, zones[i])
		}
	}

	var st admin.KeyView
	get(t, h, "/v1/keys/state?key="+url.QueryEscape(all[0].Key), http.StatusOK, &st)
	if len(st.Limits) != 1 || !st.Limits[0].Over || st.Limits[0].Remaining != 0 || st.Limits[0].ResetAfterSeconds <= 0 {
		t.Fatalf("state of z1: got %+v, want its one limit over, 0 remaining, a reset time", st.Limits)
	}
	get(t, h, "/v1/keys/state?domain=edge&entry=zone=z2", http.StatusOK, &st)
	if st.Limits[0].Over || st.Limits[0].Remaining != 0 {
		t.Fatalf("state of z2 by descriptor: got %+v, want 0 remaining but not over", st.Limits)
	}

	post(t, h, "/v1/keys/reset?key="+url.QueryEscape(all[0].Key), http.StatusOK)
	if resp := hit(t, e, rules.Entry{Key: "zone", Value: "z1"}); resp.Code != rules.OK {
		t.Errorf("z1 after a reset: got %v, want OK", resp.Code)
	}
	post(t, h, "/v1/keys/reset?domain=edge&entry=zone=z2", http.StatusOK)
	if resp := hit(t, e, rules.Entry{Key: "zone", Value: "z2"}); resp.Code != rules.OK {
		t.Errorf("z2 after a reset by descriptor: got %v, want OK", resp.Code)
	}
}

func TestKeysBadRequests(t *testing.T) {
	e := keyEngine(t)
	h := admin.Handler(admin.Options{Engine: e})
	var body map[string]string
	for path, want := range map[string]int{
		"/v1/keys?cursor=xyz":                         http.StatusBadRequest,
		"/v1/keys?limit=0":                            http.StatusBadRequest,
		"/v1/keys/state":                              http.StatusBadRequest,
		"/v1/keys/state?key=nope":                     http.StatusNotFound,
		"/v1/keys/state?domain=nowhere&entry=zone=1":  http.StatusNotFound,
		"/v1/keys/state?domain=edge&entry=zone":       http.StatusBadRequest,
		"/v1/keys/state?domain=edge&entry=other=1":    http.StatusBadRequest,
		"/v1/keys/state?domain=edge&entry=internal=1": http.StatusBadRequest, // unlimited: no state
	} {
		t.Run(path, func(t *testing.T) {
			get(t, h, path, want, &body)
			if body["error"] == "" || body["message"] == "" {
				t.Errorf("got %v, want an error and a message", body)
			}
		})
	}
	off := admin.Handler(admin.Options{Engine: rules.NewEngine(config(t, envoyFile), nil)})
	get(t, off, "/v1/keys", http.StatusNotImplemented, &body)
}

// A reset forgets a key's state: a sliding window counter's previous
// window goes with its current one, so the key shows its whole limit, not
// a refund's share of it.
func TestKeysResetForgetsState(t *testing.T) {
	c, err := rules.Parse("swc.yaml", []byte("domain: w\nrules:\n  - name: per_user\n    match: [{key: user}]\n    algorithm: sliding_window_counter\n    limits: [{rate: 10, period: 1m}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Start)
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	e.Now = clock.Now
	h := admin.Handler(admin.Options{Engine: e})
	decideW := func() rules.Response {
		t.Helper()
		resp, err := e.Decide(t.Context(), rules.Request{Domain: "w", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "user", Value: "u"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for range 10 {
		decideW()
	}
	// Late in the next window the 10 weigh in as 1: 9 more pass, and the
	// key holds 19 units, more than a refund of its capacity gives back.
	clock.Advance(2*time.Minute - time.Second)
	for range 9 {
		if resp := decideW(); resp.Code != rules.OK {
			t.Fatalf("a check late in the second window: %v, want OK", resp.Code)
		}
	}
	post(t, h, "/v1/keys/reset?domain=w&entry=user=u", http.StatusOK)
	var v admin.KeyView
	get(t, h, "/v1/keys/state?domain=w&entry=user=u", http.StatusOK, &v)
	if len(v.Limits) != 1 || v.Limits[0].Remaining != 10 || v.Limits[0].Over {
		t.Fatalf("state after a reset: %+v, want all 10 remaining", v.Limits)
	}

	// A store that cannot reset says so.
	plain := admin.Handler(admin.Options{Engine: rules.NewEngine(c, onlyLimiter{st})})
	post(t, plain, "/v1/keys/reset?domain=w&entry=user=u", http.StatusNotImplemented)
}

// onlyLimiter hides every method of its store but the Limiter's.
type onlyLimiter struct{ bouncer.Limiter }

// A key names its rule as the metrics do: by the rule's name (per_user),
// and by its descriptor path (zone) only when the rule has no name.
func TestKeysNameTheirRule(t *testing.T) {
	c, err := rules.Parse("app.yaml", []byte("domain: app\nrules:\n  - name: per_user\n    match: [{key: user_id}]\n    limits: [{rate: 10, period: 1m}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	e.Keys = admin.NewKeyIndex(10)
	if _, err := e.Decide(t.Context(), rules.Request{Domain: "app", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "user_id", Value: "u"}}}}}); err != nil {
		t.Fatal(err)
	}
	h := admin.Handler(admin.Options{Engine: e})
	var list struct{ Keys []admin.KeyView }
	get(t, h, "/v1/keys", http.StatusOK, &list)
	if len(list.Keys) != 1 || list.Keys[0].Rule != "per_user" {
		t.Errorf("/v1/keys: got %+v, want one key of rule per_user", list.Keys)
	}
	var v admin.KeyView
	get(t, h, "/v1/keys/state?domain=app&entry=user_id=u", http.StatusOK, &v)
	if v.Rule != "per_user" {
		t.Errorf("/v1/keys/state: rule %q, want per_user", v.Rule)
	}

	e = keyEngine(t)
	hit(t, e, rules.Entry{Key: "zone", Value: "z1"})
	get(t, admin.Handler(admin.Options{Engine: e}), "/v1/keys", http.StatusOK, &list)
	if len(list.Keys) != 1 || list.Keys[0].Rule != "zone" {
		t.Errorf("/v1/keys of a rule without a name: got %+v, want rule zone", list.Keys)
	}
}

// A key under a priced rule shows its budget in money: the limit, what
// it spent and what is left; a calendar limit shows its period.
func TestKeysShowSpend(t *testing.T) {
	c, err := rules.Parse("llm.yaml", []byte("domain: llm\nprices:\n  p:\n    currency: EUR\n    models: {m: {input: 2, output: 8}}\nrules:\n  - name: budget\n    match: [{key: api_key}]\n    price: p\n    limits: [{budget: 50, period: calendar_month, timezone: Europe/Paris}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Start)
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	e.Now = clock.Now
	h := admin.Handler(admin.Options{Engine: e})
	u := rules.Usage{Model: "m", Input: 1_000_000, Output: 1_250_000} // €2 + €10
	if _, err := e.Report(t.Context(), rules.Request{Domain: "llm", Usage: &u, Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "api_key", Value: "a"}}}}}); err != nil {
		t.Fatal(err)
	}
	var v admin.KeyView
	get(t, h, "/v1/keys/state?domain=llm&entry=api_key=a", http.StatusOK, &v)
	want := admin.BudgetView{Currency: "EUR", Limit: "50.00", Spent: "12.00", Remaining: "38.00"}
	if len(v.Limits) != 1 || v.Limits[0].Budget == nil || *v.Limits[0].Budget != want || v.Limits[0].Period != "calendar_month Europe/Paris" {
		t.Fatalf("the key's limits: %+v, want a budget of %+v over a calendar month in Paris", v.Limits, want)
	}
}
