package httplimit_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
)

// recording is a limiter that keeps the keys it is asked to check.
type recording struct {
	bouncer.Limiter
	mu   sync.Mutex
	keys []string
}

func (r *recording) Check(ctx context.Context, req bouncer.Request) (bouncer.Decision, error) {
	r.mu.Lock()
	for _, k := range req.Keys {
		r.keys = append(r.keys, k.Key)
	}
	r.mu.Unlock()
	return r.Limiter.Check(ctx, req)
}

// Values a client controls are escaped and bounded before they reach the
// store, malformed requests are refused by the server with a 4xx, and
// nothing a client sends makes the middleware panic.
func TestHostileInputs(t *testing.T) {
	s, _ := newStore(t)
	rec := &recording{Limiter: s}
	rules := []httplimit.Rule{
		{Name: "per_key", Key: httplimit.APIKey("X-API-Key", "api_key"), Limits: []bouncer.Limit{perMinute("m", 2)}},
		{Name: "per_route", Key: httplimit.Compose(httplimit.Route(), httplimit.Header("X-Tenant")), Limits: []bouncer.Limit{perMinute("m", 100)}},
		{Name: "per_ip", Key: httplimit.IP(nil), Limits: []bouncer.Limit{perMinute("m", 100)}},
	}
	srv := serve(t, rec, rules, httplimit.Options{}, nil)

	huge := strings.Repeat("k", 64<<10)
	for i, want := range []int{200, 200, 429} {
		a := get(t, srv, "/"+strings.Repeat("p", 8<<10), "X-API-Key", huge, "X-Tenant", "a}{:b%#",
			"X-Forwarded-For", strings.Repeat("999.1.1.1, [::1, ", 2000), "Forwarded", `for="[::1`, "Accept", strings.Repeat("x/y;q=", 500))
		if a.status != want {
			t.Fatalf("request %d with a 64 KiB key: %d, want %d", i, a.status, want)
		}
	}
	// A key that differs in its last byte is another key.
	if a := get(t, srv, "/", "X-API-Key", huge[:len(huge)-1]+"j"); a.status != 200 {
		t.Fatalf("a different huge key: %d, want 200", a.status)
	}
	rec.mu.Lock()
	for _, k := range rec.keys {
		if len(k) > 512 || strings.ContainsAny(k, "{}") {
			t.Errorf("store key %q (%d bytes): want at most 512 bytes, no braces", k[:min(len(k), 80)], len(k))
		}
	}
	rec.mu.Unlock()

	// A request the HTTP parser cannot read is answered 400 before it
	// reaches the middleware.
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a malformed header line: %d, want 400", resp.StatusCode)
	}
}

// A path-keyed rule counts every spelling of a path under one key, so
// that /p//expensive and /p/x/../expensive cannot dodge a limit reached by
// /p/expensive, in front of a handler that serves them as one; an
// excluded prefix cannot be reached by a detour out of it.
func TestPathSpellingsShareAKey(t *testing.T) {
	s, _ := newStore(t)
	rec := &recording{Limiter: s}
	rules := []httplimit.Rule{{Name: "per_path", Key: httplimit.Route(), Limits: []bouncer.Limit{perMinute("m", 3)}}}
	srv := serve(t, rec, rules, httplimit.Options{Exclude: httplimit.ExcludePaths("/static/")}, nil)
	for i := range 3 {
		if a := get(t, srv, "/p/expensive"); a.status != 200 {
			t.Fatalf("request %d to /p/expensive: %d, want 200", i, a.status)
		}
	}
	for _, p := range []string{"/p//expensive", "/p/./expensive", "/p/x/../expensive", "/p/%65xpensive", "//p/expensive", "/static/../p/expensive"} {
		if a := get(t, srv, p); a.status != http.StatusTooManyRequests {
			t.Errorf("%s after /p/expensive's limit: %d, want 429 (one path, one count)", p, a.status)
		}
	}
	if a := get(t, srv, "/static/app.js"); a.status != 200 || a.header.Get("RateLimit") != "" {
		t.Errorf("/static/app.js: %d with RateLimit %q, want 200, not limited", a.status, a.header.Get("RateLimit"))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, k := range rec.keys {
		if k != "per_path:/p/expensive" {
			t.Errorf("store key %q, want per_path:/p/expensive alone", k)
		}
	}
}

// invalid is a limiter that finds every request invalid, as one that
// bounds its keys would find a client's over-long one.
type invalid struct{ bouncer.Limiter }

func (invalid) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{}, fmt.Errorf("%w: key too long", bouncer.ErrInvalidRequest)
}

// A request the limiter finds invalid is the client's mistake: 400 in
// JSON, never the 503 of an outage.
func TestInvalidRequestIsA4xx(t *testing.T) {
	s, _ := newStore(t)
	rules := []httplimit.Rule{{Name: "all", Limits: []bouncer.Limit{perMinute("m", 3)}}}
	srv := serve(t, invalid{s}, rules, httplimit.Options{}, nil)
	a := get(t, srv, "/")
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"invalid_request"`) {
		t.Fatalf("got %d %s, want 400 invalid_request", a.status, a.body)
	}
}
