package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// example is the example's gateway.yaml and rules.yaml in front of its
// fake model at model, on store, on a clock: only the model's address
// changes. It returns the gateway's server and its admin API.
func example(t *testing.T, model string, store *memstore.Store, clock *storetest.Clock) (*httptest.Server, http.Handler) {
	t.Helper()
	cfgText, err := os.ReadFile("gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rulesText, err := os.ReadFile("rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rulesText, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(cfgText), "http://127.0.0.1:9096", model)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rules.Load(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	e := rules.NewEngine(rc, store)
	e.Now = clock.Now
	g, err := gateway.New(cfg, gateway.Options{Engine: e, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv, admin.Handler(admin.Options{Engine: e, Credentials: true, Logger: slog.New(slog.DiscardHandler)})
}

type answer struct {
	status  int
	header  http.Header
	trailer http.Header
	body    string
}

func complete(t *testing.T, srv *httptest.Server, key, estimate, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	if estimate != "" {
		req.Header.Set("X-Estimated-Tokens", estimate)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, resp.Trailer, string(b)}
}

// The example as the README's tour runs it, on a clock the test moves:
// 20 000 tokens a minute per key (a large stream puts alice in debt for
// a few seconds); $50 a calendar month in the key's own zone, spent at
// the large model's price in three requests, after which alice is
// refused until the month ends in New York; a raise of her budget
// through the admin API lets her in at once; the memory store's state
// file keeps her spend across a restart; bob, in Paris, is never
// affected.
func TestExampleLLMGateway(t *testing.T) {
	var calls atomic.Int64
	m := model()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		m.ServeHTTP(w, r)
	}))
	defer up.Close()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 12, 7, 12, 0, 0, 0, ny))
	store := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	defer store.Close()
	srv, adm := example(t, up.URL, store, clock)

	// A small completion: 100 output tokens and 2 input, reported in
	// headers; the budget left after its reservation.
	a := complete(t, srv, "demo-alice-key", "", `{"model": "small", "prompt": "hello there", "max_tokens": 100}`)
	if a.status != 200 || a.header.Get("X-Usage-Output-Tokens") != "100" || a.header.Get("X-Usage-Input-Tokens") != "2" || a.header.Get(gateway.BudgetHeader) != "49.999996 USD" {
		t.Fatalf("a small completion: %d, usage %q/%q, budget %q", a.status, a.header.Get("X-Usage-Input-Tokens"), a.header.Get("X-Usage-Output-Tokens"), a.header.Get(gateway.BudgetHeader))
	}
	// A 25 000-token stream of the small model, estimated at 100: it
	// passes, and its trailer's tokens put alice 5 000 past her 20 000 a
	// minute: refused until 5 001 tokens have come back (15.003 s).
	a = complete(t, srv, "demo-alice-key", "100", `{"model": "small", "max_tokens": 25000, "stream": true}`)
	if a.status != 200 || a.trailer.Get("X-Usage-Output-Tokens") != "25000" {
		t.Fatalf("a large stream: %d, trailer %v", a.status, a.trailer)
	}
	a = complete(t, srv, "demo-alice-key", "", `{"model": "small", "max_tokens": 10}`)
	if a.status != 429 || a.header.Get("Retry-After") != "16" {
		t.Fatalf("past 20 000 tokens a minute: %d, Retry-After %q; want 429, 16", a.status, a.header.Get("Retry-After"))
	}
	clock.Advance(16 * time.Second)
	// Three large completions of 5 000 tokens, $20 each: $50 is spent,
	// and the next request is refused until December ends in New York.
	for i := range 3 {
		if a = complete(t, srv, "demo-alice-key", "", `{"model": "large", "max_tokens": 5000}`); a.status != 200 {
			t.Fatalf("large completion %d: %d %s", i+1, a.status, a.body)
		}
		clock.Advance(20 * time.Second)
	}
	a = complete(t, srv, "demo-alice-key", "", `{"model": "small", "max_tokens": 10}`)
	renew := time.Date(2027, 1, 1, 0, 0, 0, 0, ny).Sub(clock.Now())
	if a.status != 429 || a.header.Get("Retry-After") != strconv.Itoa(int(renew.Seconds())) || a.header.Get(gateway.BudgetHeader) != "0.00 USD" {
		t.Fatalf("the budget spent: %d, Retry-After %q, budget %q; want 429 until %v (%d s) and 0.00 USD",
			a.status, a.header.Get("Retry-After"), a.header.Get(gateway.BudgetHeader), renew, int(renew.Seconds()))
	}
	if a := complete(t, srv, "demo-bob-key", "", `{"model": "large", "max_tokens": 10}`); a.status != 200 || a.header.Get(gateway.BudgetHeader) != "49.996 USD" {
		t.Fatalf("bob, another key: %d, budget %q", a.status, a.header.Get(gateway.BudgetHeader))
	}
	// A raise to $100, at once: the $50 she spent carry over.
	w := httptest.NewRecorder()
	adm.ServeHTTP(w, httptest.NewRequest(http.MethodPut, "/v1/limits?domain=llm&entry=api_key=alice&entry=meter=dollars&entry=time_zone=America/New_York",
		strings.NewReader(`{"rates": {"per_month": 100}, "by": "billing@example.com"}`)))
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"remaining":"50.00"`) {
		t.Fatalf("the raise: %d %s", w.Code, w.Body)
	}
	if a = complete(t, srv, "demo-alice-key", "", `{"model": "small", "max_tokens": 10}`); a.status != 200 || a.header.Get(gateway.BudgetHeader) != "49.999996 USD" {
		t.Fatalf("after the raise: %d, budget %q", a.status, a.header.Get(gateway.BudgetHeader))
	}
	// A restart: the state file keeps the spend (that request settled at
	// $0.000041: 1 input and 10 output tokens of the small model) and
	// the raise.
	path := filepath.Join(t.TempDir(), "state")
	if _, err := store.Save(path); err != nil {
		t.Fatal(err)
	}
	again := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	defer again.Close()
	if _, err := again.Load(path); err != nil {
		t.Fatal(err)
	}
	srv2, _ := example(t, up.URL, again, clock)
	if a = complete(t, srv2, "demo-alice-key", "", `{"model": "small", "max_tokens": 10}`); a.status != 200 || a.header.Get(gateway.BudgetHeader) != "49.999955 USD" {
		t.Fatalf("after a restart: %d, budget %q; want the spend kept", a.status, a.header.Get(gateway.BudgetHeader))
	}
	if got := calls.Load(); got != 8 {
		t.Errorf("the model served %d requests, want 8: refused ones never reach it", got)
	}
}
