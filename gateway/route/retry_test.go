package route_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bouncerhq/bouncer/gateway/route"
)

// counted serves h and counts its requests.
type counted struct {
	url  string
	hits atomic.Int64
}

func newCounted(t *testing.T, h http.HandlerFunc) *counted {
	t.Helper()
	c := &counted{}
	c.url = httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		h(w, r)
	}))
	return c
}

// hangUp closes the connection without answering.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestRetries(t *testing.T) {
	unavailable := func(w http.ResponseWriter, r *http.Request) { http.Error(w, "busy", http.StatusServiceUnavailable) }
	for _, tc := range []struct {
		name    string
		first   http.HandlerFunc // the first upstream; the second echoes
		retries int
		method  string
		key     bool // send an Idempotency-Key
		buffer  bool // GetBody set by a middleware
		body    string
		status  int
		hits    [2]int64 // of the first and the second upstream
	}{
		{name: "GET after a hang-up", first: hangUp, retries: 1, method: "GET", status: 200, hits: [2]int64{1, 1}},
		{name: "GET after a 503", first: unavailable, retries: 1, method: "GET", status: 200, hits: [2]int64{1, 1}},
		{name: "GET without retries", first: hangUp, retries: 0, method: "GET", status: 502, hits: [2]int64{1, 0}},
		{name: "DELETE with a body and GetBody", first: hangUp, retries: 1, method: "DELETE", buffer: true, body: "x", status: 200, hits: [2]int64{1, 1}},
		{name: "POST", first: hangUp, retries: 2, method: "POST", body: "payload", status: 502, hits: [2]int64{1, 0}},
		{name: "POST after a 503", first: unavailable, retries: 2, method: "POST", body: "payload", status: 503, hits: [2]int64{1, 0}},
		{name: "POST with a key and GetBody", first: hangUp, retries: 1, method: "POST", key: true, buffer: true, body: "payload", status: 200, hits: [2]int64{1, 1}},
		{name: "POST with a key, empty", first: hangUp, retries: 1, method: "POST", key: true, status: 200, hits: [2]int64{1, 1}},
		{name: "POST with a key, no GetBody", first: hangUp, retries: 1, method: "POST", key: true, body: "payload", status: 502, hits: [2]int64{1, 0}},
		{name: "PUT with a body, no GetBody", first: hangUp, retries: 1, method: "PUT", body: "payload", status: 502, hits: [2]int64{1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := newCounted(t, tc.first)
			second := newEcho(t, "second")
			table := newTable(t, []route.Route{
				{Name: "r", PathPrefix: "/", Retries: tc.retries, Eject: route.Eject{Failures: -1}, Upstreams: []string{first.url, second.URL}},
			}, route.Options{})
			base, client := gateway(t, table, tc.buffer)
			req, _ := http.NewRequest(tc.method, base+"/x", strings.NewReader(tc.body))
			if tc.body == "" {
				req.Body = http.NoBody
			}
			if tc.key {
				req.Header.Set("Idempotency-Key", "k-1")
			}
			status, _, body := do(t, client, req)
			if status != tc.status {
				t.Errorf("got status %d (%s), want %d", status, body, tc.status)
			}
			if got := [2]int64{first.hits.Load(), second.hits.Load()}; got != tc.hits {
				t.Errorf("got %v attempts on the upstreams, want %v", got, tc.hits)
			}
			if status == http.StatusOK {
				if s := decodeSeen(t, body); s.Body != tc.body || s.Method != tc.method {
					t.Errorf("second upstream got %s %q, want %s %q", s.Method, s.Body, tc.method, tc.body)
				}
			}
		})
	}
	t.Run("every attempt fails", func(t *testing.T) {
		a, b := newCounted(t, hangUp), newCounted(t, hangUp)
		table := newTable(t, []route.Route{
			{Name: "r", PathPrefix: "/", Retries: 4, Eject: route.Eject{Failures: -1}, Upstreams: []string{a.url, b.url}},
		}, route.Options{})
		base, client := gateway(t, table, false)
		status, _, body := get(t, client, base+"/")
		if status != http.StatusBadGateway || decodeError(t, body).Error != "bad_gateway" {
			t.Errorf("got %d %s, want 502 bad_gateway", status, body)
		}
		if got := [2]int64{a.hits.Load(), b.hits.Load()}; got != [2]int64{3, 2} {
			t.Errorf("got %v attempts, want [3 2]: five, alternating", got)
		}
	})
}
