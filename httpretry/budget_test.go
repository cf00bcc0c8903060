package httpretry_test

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// TestBudget follows a budget of 2 tokens, half a token back per
// success, through failures (503 on every attempt) and successes.
func TestBudget(t *testing.T) {
	var failing atomic.Bool
	var attempts atomic.Int32
	srv := serveFunc(t, func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		if failing.Load() {
			w.WriteHeader(503)
		}
	})
	c := newClock()
	rt := newTransport(srv, c)
	rt.MaxRetries = 5
	rt.Budget.Tokens = 2
	rt.Budget.Refill = 0.5
	for i, step := range []struct {
		fail     bool
		attempts int
	}{
		{true, 3},  // two retries: 0 tokens left
		{true, 1},  // none left
		{false, 1}, // 0.5
		{true, 1},  // less than one
		{false, 1}, // 1
		{true, 2},  // one retry: 0
		{true, 1},
		{false, 1}, {false, 1}, {false, 1}, {false, 1}, {false, 1}, // 2.5, capped at 2
		{true, 3},
	} {
		failing.Store(step.fail)
		attempts.Store(0)
		status, err := get(t.Context(), t, rt, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 503, false: 200}[step.fail]; status != want {
			t.Errorf("step %d: got %d, want %d", i, status, want)
		}
		if got := int(attempts.Load()); got != step.attempts {
			t.Errorf("step %d: got %d attempts, want %d", i, got, step.attempts)
		}
	}
}
