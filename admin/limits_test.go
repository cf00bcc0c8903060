package admin_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

const budgetRules = `domain: llm
prices:
  p:
    currency: USD
    models: {m: {input: 1}}
rules:
  - name: budget
    match: [{key: api_key}]
    price: p
    limits: [{name: month, budget: 50, period: calendar_month}]
    overrides:
      month: {min: 10, max: 500.50}
  - name: fixed
    match: [{key: user}]
    limits: [{rate: 5, period: 1m}]
`

func send(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	return w
}

// A budget raised at runtime keeps what the key spent: $45 of $50, then
// $100, leaves $55; the rule's bounds hold; only the rule's overrides may
// be set; a change is refused without credentials; each change is
// audited; deleting it gives the rule's budget back with the spend.
func TestRuntimeBudget(t *testing.T) {
	c, err := rules.Parse("llm.yaml", []byte(budgetRules))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Start)
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	e.Now = clock.Now
	var log bytes.Buffer
	var changes []admin.LimitsChange
	h := admin.Handler(admin.Options{Engine: e, Credentials: true, Logger: slog.New(slog.NewTextHandler(&log, nil)),
		OnLimitsChange: func(c admin.LimitsChange) { changes = append(changes, c) }})
	spend := func(dollars int64) rules.Response {
		t.Helper()
		u := rules.Usage{Model: "m", Input: dollars * 1_000_000}
		resp, err := e.Report(t.Context(), rules.Request{Domain: "llm", Usage: &u, Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "api_key", Value: "a"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	spend(45)
	key := "/v1/limits?domain=llm&entry=api_key=a"
	noCreds := admin.Handler(admin.Options{Engine: e})
	if w := send(t, noCreds, http.MethodPut, key, `{"rates":{"month":"100"},"by":"ops"}`); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "credentials_required") {
		t.Fatalf("without credentials: %d %s", w.Code, w.Body)
	}
	for body, want := range map[string]string{
		`{"rates":{"month":"600"},"by":"ops"}`:     "600.00 USD is outside the rule's bounds, 10.00 USD to 500.50 USD",
		`{"rates":{"month":"5"},"by":"ops"}`:       "outside the rule's bounds",
		`{"rates":{"day":"5"},"by":"ops"}`:         "lets a key set [month], not this limit",
		`{"rates":{"month":"100"}}`:                "by: required",
		`{"rates":{"month":"1.0000001"},"by":"x"}`: "more than six decimals",
		`{"rates":{}}, "by": "x"`:                  "malformed JSON",
	} {
		if w := send(t, h, http.MethodPut, key, body); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), want) {
			t.Errorf("PUT %s: %d %s, want 400 saying %q", body, w.Code, w.Body, want)
		}
	}
	if w := send(t, h, http.MethodPut, "/v1/limits?domain=llm&entry=user=u", `{"rates":{"5_per_1m":6},"by":"ops"}`); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "lets no key have limits of its own") {
		t.Errorf("a rule without overrides: %d %s", w.Code, w.Body)
	}
	w := send(t, h, http.MethodPut, key, `{"rates":{"month":"100"},"by":"ops@example.com"}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"remaining":"55.00"`) {
		t.Fatalf("raising the budget to $100 after $45: %d %s, want $55 left", w.Code, w.Body)
	}
	if b := spend(50).Statuses[0].Budget; b.Limit != 100_000_000 || b.Remaining != 5_000_000 {
		t.Errorf("the next report sees the raised budget: %+v, want $5 of $100 left", b)
	}
	w = send(t, h, http.MethodDelete, key+"&by=ops@example.com", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"custom":null`) || !strings.Contains(w.Body.String(), `"remaining":"0.00"`) {
		t.Fatalf("deleting: %d %s, want the rule's $50, all of it spent", w.Code, w.Body)
	}
	if len(changes) != 2 || changes[0].Action != "set" || changes[0].New["month"] != "100.00" || changes[0].Old != nil ||
		changes[1].Action != "delete" || changes[1].Old["month"] != "100.00" || changes[1].New != nil {
		t.Errorf("the changes told: %+v", changes)
	}
	for _, want := range []string{`msg="runtime limits set" by=ops@example.com`, `old=none new="month=100.00"`, `msg="runtime limits delete"`, `old="month=100.00" new=none`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the audit log lacks %q:\n%s", want, log.String())
		}
	}
}
