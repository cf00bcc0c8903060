package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/memstore"
)

// The service as it is, behind a real listener: ten requests of a burst
// pass, the eleventh is refused with the headers and body a client reads,
// and /healthz is never limited.
func TestService(t *testing.T) {
	noon := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return noon }})
	defer store.Close()
	h, err := handler(store)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 10 {
		if resp := get("/hello"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d, want 200", i, resp.StatusCode)
		}
	}
	resp := get("/hello")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("RateLimit") != `"per_ip.second";r=0;t=2` {
		t.Fatalf("11th request: %d, Retry-After %q, RateLimit %q; want 429, 1 and per_ip.second with r=0, t=2",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"))
	}
	for range 20 {
		if resp := get("/healthz"); resp.StatusCode != 200 {
			t.Fatalf("/healthz: %d, want 200 (excluded)", resp.StatusCode)
		}
	}
}

// The README's tour runs servers of its own beside this example; the
// example's default address must not be one of theirs, or whichever
// starts second fails.
func TestDefaultAddrFreeOfTheTour(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`--[a-z]+-addr (\S+)`).FindAllStringSubmatch(string(readme), -1) {
		if m[1] == defaultAddr {
			t.Errorf("the README's tour serves on %s, this example's default address", m[1])
		}
	}
}
