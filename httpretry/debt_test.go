package httpretry_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// A server that meters a cost known after the response (LLM tokens)
// can leave a client in debt: its quota is spent past its capacity, and
// the RateLimit field then says r=0 with a t beyond one window, the time
// the debt takes to be paid back. A pacing client waits that long, not
// one window, if MaxDelay allows; else it sends at once and the server
// decides.
func TestPaceDebt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxDelay time.Duration
		slept    []time.Duration
		seen     []time.Duration // when the server saw each request
	}{
		{"the whole debt, past the window", 2 * time.Minute, []time.Duration{90 * time.Second}, []time.Duration{0, 90 * time.Second}},
		{"a debt over MaxDelay is not waited", 0, nil, []time.Duration{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			start := c.Now()
			var mu sync.Mutex
			var seen []time.Duration
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, c.Now().Sub(start))
				first := len(seen) == 1
				mu.Unlock()
				w.Header().Set("RateLimit-Policy", `"tokens";q=100;w=60`)
				if first {
					// 150 tokens used of 100 a minute: 50 owed, and all 100 back in 90 s.
					w.Header().Set("RateLimit", `"tokens";r=0;t=90`)
					return
				}
				w.Header().Set("RateLimit", `"tokens";r=99;t=1`)
			}))
			t.Cleanup(srv.Close)
			rt := newTransport(srv, c)
			rt.Pace, rt.MaxDelay = true, tc.maxDelay
			for i := range 2 {
				if status, err := get(t.Context(), t, rt, srv.URL); err != nil || status != 200 {
					t.Fatalf("request %d: got %d, %v; want 200", i, status, err)
				}
			}
			if got := c.Slept(); !slices.Equal(got, tc.slept) {
				t.Errorf("slept %v, want %v", got, tc.slept)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, tc.seen) {
				t.Errorf("the server saw requests at %v, want %v", seen, tc.seen)
			}
		})
	}
}
