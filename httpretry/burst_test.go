package httpretry_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/header"
)

// TestBurst sends n concurrent GETs through one Transport, with its
// default budget, to a server admitting 5 a second.
func TestBurst(t *testing.T) {
	const n, limit = 40, 5
	for _, pace := range []bool{false, true} {
		t.Run(fmt.Sprintf("pace=%v", pace), func(t *testing.T) {
			c := newClock()
			srv, win := serveWindow(t, c, limit, time.Second, header.IETF)
			rt := newTransport(srv, c)
			rt.Pace = pace
			deadline := c.Now().Add(10 * time.Second)
			type result struct {
				status int
				err    error
				done   time.Time
			}
			results := make([]result, n)
			for i := range n {
				c.Go(func() {
					ctx, cancel := context.WithDeadline(t.Context(), deadline)
					defer cancel()
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
					if err == nil {
						results[i].status, err = send(rt, req)
					}
					results[i].err, results[i].done = err, c.Now()
				})
			}
			c.Wait()

			statuses := map[int]int{}
			for i, r := range results {
				if r.err != nil {
					t.Errorf("request %d: %v", i, r.err)
				}
				if !r.done.Before(deadline) {
					t.Errorf("request %d: done at %v, after its deadline %v", i, r.done, deadline)
				}
				statuses[r.status]++
			}
			admitted, denied := win.counts()
			for w, a := range admitted {
				if a > limit {
					t.Errorf("window %d: the server admitted %d, above its limit %d", w, a, limit)
				}
			}
			// Every retry spends a token of the budget: 10 to start with,
			// and 0.1 back per success.
			attempts := sum(admitted) + sum(denied)
			if bound := int64(n + 10 + n/10); attempts > bound {
				t.Errorf("got %d attempts for %d requests, want at most %d", attempts, n, bound)
			}
			if statuses[200] < limit || statuses[200]+statuses[429] != n {
				t.Errorf("got statuses %v, want %d answers, at least %d of them 200", statuses, n, limit)
			}
			if pace {
				// Only the first window's 429s come before the client knew the quota.
				for w, d := range denied {
					if w > 0 && d > 0 {
						t.Errorf("window %d: %d denied, want none once the quota was known", w, d)
					}
				}
			}
			t.Logf("statuses %v, admitted %v, denied %v, %d attempts", statuses, admitted, denied, attempts)
		})
	}
}
