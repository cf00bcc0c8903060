package gateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer/gateway"
)

// A body over the bound is 413 JSON whether its length is announced or
// not, and it is the client's failure, not the upstream's: a client that
// sends many cannot get the upstream ejected.
func TestOversizedBodies(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer up.Close()
	cfg, err := gateway.Parse("g.yaml", []byte("listeners: [{addr: x}]\nmax_body_bytes: 1000\nroutes:\n  - {name: r, path_prefix: /, upstreams: ["+up.URL+"], retries: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()
	post := func(body string, chunked bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/x", strings.NewReader(body))
		if chunked {
			req.Body = io.NopCloser(strings.NewReader(body))
			req.ContentLength = -1
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	big := strings.Repeat("a", 5000)
	for i := range 10 {
		for _, chunked := range []bool{false, true} {
			if c, b := post(big, chunked); c != http.StatusRequestEntityTooLarge || !strings.Contains(b, `"body_too_large"`) {
				t.Fatalf("oversized body %d (chunked %v): %d %s, want 413 body_too_large", i, chunked, c, b)
			}
		}
	}
	if c, b := post("small", true); c != 200 {
		t.Fatalf("a small body after twenty oversized ones: %d %s, want 200 (the upstream not ejected)", c, b)
	}
}

// Headers over the bound are 431 in JSON, and counted like any answer.
func TestOversizedHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	cfg, err := gateway.Parse("g.yaml", []byte("listeners: [{addr: x}]\nroutes:\n  - {name: r, path_prefix: /, upstreams: ["+up.URL+"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), MaxHeaderBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()
	for _, c := range []struct {
		size int
		want int
	}{{1000, 200}, {5000, 431}} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
		req.Header.Set("Cookie", strings.Repeat("c", c.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || c.want == 431 && !strings.Contains(string(b), `"headers_too_large"`) {
			t.Fatalf("a %d-byte cookie: %d %s, want %d", c.size, resp.StatusCode, b, c.want)
		}
	}
}
