package httpretry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/memstore"
)

// TestPaceAgainstABucket sends rounds of concurrent GETs through one
// pacing Transport to Bouncer's middleware limiting a token bucket of 5 a
// second with bursts of 10, whose fields say q=10 over w=2 s and t until
// the bucket is full again. A client that paces by them is never refused.
func TestPaceAgainstABucket(t *testing.T) {
	c := newClock()
	store := memstore.New(memstore.Options{Now: c.Now})
	t.Cleanup(func() { store.Close() })
	var allowed, denied atomic.Int64
	mw, err := httplimit.Middleware(store, []httplimit.Rule{{
		Name:   "bucket",
		Limits: []bouncer.Limit{{Name: "b", Algorithm: bouncer.TokenBucket, Rate: 5, Period: time.Second, Burst: 10}},
	}}, httplimit.Options{Observe: func(_ *http.Request, _ string, d bouncer.Decision, _ bool) {
		if d.Allowed {
			allowed.Add(1)
		} else {
			denied.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })))
	t.Cleanup(srv.Close)
	rt := newTransport(srv, c)
	rt.Pace = true

	deadline := c.Now().Add(time.Minute)
	if status, err := get(t.Context(), t, rt, srv.URL); err != nil || status != http.StatusOK {
		t.Fatalf("first request: got %d, %v; want 200", status, err)
	}
	const rounds, n = 3, 15
	for round := range rounds {
		statuses := make([]int, n)
		for i := range n {
			c.Go(func() {
				ctx, cancel := context.WithDeadline(t.Context(), deadline)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				if err == nil {
					statuses[i], _ = send(rt, req)
				}
			})
		}
		c.Wait()
		for i, s := range statuses {
			if s != http.StatusOK {
				t.Errorf("round %d, request %d: got %d, want 200", round, i, s)
			}
		}
	}
	if got, want := allowed.Load(), int64(1+rounds*n); got != want {
		t.Errorf("the server admitted %d, want %d", got, want)
	}
	if got := denied.Load(); got != 0 {
		t.Errorf("the server refused %d requests of a pacing client, want 0", got)
	}
}
