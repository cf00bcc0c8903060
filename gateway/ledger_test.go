package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// A request refused after its decision (a shaping wait past the bound)
// gives back its place in the queue, but a shadow rule that watched it
// keeps it counted, as the middleware's shadow rules do.
func TestRefusedAfterDecisionKeepsShadowUnits(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	dir := t.TempDir()
	const rc = `domain: d
rules:
  - name: shaped
    match: [{key: route, value: shaped}]
    limits: [{name: queue, algorithm: leaky_bucket, shape: true, rate: 1, period: 2s, burst: 3}]
  - name: watch
    shadow: true
    match: [{key: method}]
    limits: [{name: hourly, algorithm: fixed_window, rate: 5, period: 1h}]
`
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "g.yaml")
	if err := os.WriteFile(file, []byte("rules: rules.yaml\nlisteners: [{addr: x}]\nroutes:\n  - {name: shaped, path_prefix: /shaped/, upstreams: ["+up.URL+"], limits: {domain: d, descriptors: [[route], [method]]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	rcfg, err := rules.Load(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Options{Now: clock.Now})
	defer store.Close()
	engine := rules.NewEngine(rcfg, store)
	g, err := gateway.New(cfg, gateway.Options{Engine: engine, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()

	ctx := context.Background()
	if c, _ := statusOf(t, ctx, srv.URL+"/shaped/a"); c != 200 {
		t.Fatalf("the first request: %d, want 200", c)
	}
	if c, _ := statusOf(t, ctx, srv.URL+"/shaped/b"); c != 429 {
		t.Fatalf("a request due 2 s later: %d, want 429", c)
	}
	peek := rules.Request{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "method", Value: "GET"}}, Hits: new(uint64)}}}
	resp, err := engine.Decide(ctx, peek)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Statuses[0].Remaining; got != 3 {
		t.Errorf("the shadow rule's remaining: got %d, want 3 (both requests counted)", got)
	}
	clock.Advance(2 * time.Second)
	if c, _ := statusOf(t, ctx, srv.URL+"/shaped/c"); c != 200 {
		t.Fatalf("2 s later: %d, want 200 (the refused request gave its place back)", c)
	}
}
