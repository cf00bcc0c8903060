package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// The example as the README's tour runs it: its gateway.yaml and
// rules.yaml in front of its fake model, on a clock the test moves. Only
// the model's address changes, to a free port. Alice goes into debt with
// a large streamed completion, is refused until the debt is paid back,
// and comes back; bob, another key, is never affected.
func TestExampleLLMGateway(t *testing.T) {
	var calls atomic.Int64
	m := model()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		m.ServeHTTP(w, r)
	}))
	defer up.Close()
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
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(cfgText), "http://127.0.0.1:9096", up.URL)), 0o600); err != nil {
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
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Options{Now: clock.Now})
	defer store.Close()
	g, err := gateway.New(cfg, gateway.Options{Engine: rules.NewEngine(rc, store), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()

	type answer struct {
		status  int
		header  http.Header
		trailer http.Header
		body    string
	}
	complete := func(key, estimate, body string) answer {
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

	// A small completion: 100 tokens, reported in a header. The
	// rate-limit headers, written before the answer, show the
	// reservation (1 token: alice stated no estimate).
	a := complete("demo-alice-key", "", `{"max_tokens": 100}`)
	if a.status != 200 || a.header.Get("X-Usage-Tokens") != "100" || a.header.Get("X-RateLimit-Remaining") != "999" {
		t.Fatalf("a small completion: %d, usage %q, remaining %q; want 200, 100, 999", a.status, a.header.Get("X-Usage-Tokens"), a.header.Get("X-RateLimit-Remaining"))
	}
	// A large streamed completion, estimated at 100: it passes (900
	// left), and the 1500 tokens its trailer reports are charged: 600
	// past the limit.
	a = complete("demo-alice-key", "100", `{"max_tokens": 1500, "stream": true}`)
	if a.status != 200 || a.trailer.Get("X-Usage-Tokens") != "1500" || strings.Count(a.body, "tok") != 1500 {
		t.Fatalf("a large completion: %d, trailer %v, %d tokens; want 200 and 1500", a.status, a.trailer, strings.Count(a.body, "tok"))
	}
	// In debt: refused without reaching the model, until 601 tokens have
	// come back at 1000 a minute (36.06 s).
	a = complete("demo-alice-key", "", `{"max_tokens": 10}`)
	if a.status != 429 || a.header.Get("Retry-After") != "37" || !strings.Contains(a.body, `"rate_limited"`) {
		t.Fatalf("in debt: %d, Retry-After %q, %s; want 429, 37 and rate_limited", a.status, a.header.Get("Retry-After"), a.body)
	}
	if a := complete("demo-bob-key", "", `{"max_tokens": 10}`); a.status != 200 {
		t.Fatalf("bob, another key: %d, want 200", a.status)
	}
	clock.Advance(36 * time.Second)
	if a := complete("demo-alice-key", "", `{"max_tokens": 10}`); a.status != 429 {
		t.Fatalf("36 s later, the debt just paid: %d, want 429", a.status)
	}
	clock.Advance(time.Second)
	if a := complete("demo-alice-key", "", `{"max_tokens": 10}`); a.status != 200 {
		t.Fatalf("37 s later: %d, want 200", a.status)
	}
	if got := calls.Load(); got != 4 {
		t.Errorf("the model served %d requests, want 4: refused ones never reach it", got)
	}
}
