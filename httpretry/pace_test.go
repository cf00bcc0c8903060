package httpretry_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/header"
)

// TestPace sends requests one after another to a server admitting one
// every 2 seconds, which answers the first `RateLimit: "default";r=0;t=2`
// (or X-RateLimit-Remaining: 0 and X-RateLimit-Reset: 2).
func TestPace(t *testing.T) {
	for _, tc := range []struct {
		mode   header.Mode
		pace   bool
		denied int64
	}{
		{header.IETF, true, 0},
		{header.IETF, false, 3},
		{header.XRateLimit, true, 0},
		{header.XRateLimit, false, 3},
	} {
		t.Run(fmt.Sprintf("mode=%v/pace=%v", map[header.Mode]string{header.IETF: "ietf", header.XRateLimit: "x-ratelimit"}[tc.mode], tc.pace), func(t *testing.T) {
			c := newClock()
			srv, win := serveWindow(t, c, 1, 2*time.Second, tc.mode)
			rt := newTransport(srv, c)
			rt.Pace = tc.pace
			for i := range 4 {
				if status, err := get(t.Context(), t, rt, srv.URL); err != nil || status != 200 {
					t.Fatalf("request %d: got %d, %v; want 200", i, status, err)
				}
			}
			if _, denied := win.counts(); sum(denied) != tc.denied {
				t.Errorf("got %d 429s, want %d", sum(denied), tc.denied)
			}
			if got, want := c.Slept(), []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}; !slices.Equal(got, want) {
				t.Errorf("slept %v, want %v", got, want)
			}
		})
	}
}
