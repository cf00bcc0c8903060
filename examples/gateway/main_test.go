package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

// The example as the README's tour runs it: its gateway.yaml and
// rules.yaml in front of its upstream, with a token it prints. Only the
// upstream's address changes, to a free port.
func TestExampleGateway(t *testing.T) {
	up := httptest.NewServer(upstream())
	defer up.Close()
	cfgText, err := os.ReadFile("gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"rules.yaml", "demo-hs256.key"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(cfgText), "http://127.0.0.1:9001", up.URL)), 0o600); err != nil {
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
	store := memstore.New(memstore.Options{})
	defer store.Close()
	g, err := gateway.New(cfg, gateway.Options{Engine: rules.NewEngine(rc, store), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()

	get := func(path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get("/api/hello"); resp.StatusCode != 401 || !strings.Contains(body, `"unauthenticated"`) {
		t.Fatalf("without a token: %d %s, want 401", resp.StatusCode, body)
	}
	tok, err := demoToken("alice", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		resp, body := get("/api/hello", "Authorization", "Bearer "+tok)
		if resp.StatusCode != 200 || body != "hello alice (plan \"\", by \"jwt\") at /hello\n" {
			t.Fatalf("alice's request %d: %d %q", i, resp.StatusCode, body)
		}
		if resp.Header.Get("RateLimit-Policy") == "" || resp.Header.Get("RateLimit") == "" || resp.Header.Get("X-RateLimit-Remaining") == "" {
			t.Fatalf("alice's request %d: headers %v, want the rate-limit fields", i, resp.Header)
		}
	}
	resp, body := get("/api/hello", "Authorization", "Bearer "+tok)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit") == "" ||
		resp.Header.Get("X-RateLimit-Limit") == "" || !strings.Contains(body, `"rate_limited"`) {
		t.Fatalf("alice's 4th request (a burst of 3): %d %v %s, want 429 with every header", resp.StatusCode, resp.Header, body)
	}
	if resp, body := get("/partners/hello", "X-API-Key", "demo-partner-key"); resp.StatusCode != 200 || !strings.HasPrefix(body, "hello acme (plan \"pro\", by \"api_key\")") {
		t.Fatalf("the partner's key: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get("/public/hello"); resp.StatusCode != 200 {
		t.Fatalf("public: %d, want 200", resp.StatusCode)
	}
}
