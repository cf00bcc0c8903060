package httplimit_test

import (
	"bufio"
	"context"
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
