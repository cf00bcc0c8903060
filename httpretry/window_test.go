package httpretry_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/header"
)

// window is a real server that admits limit requests per period, in
// fixed windows from its start on the test's clock. Every answer carries
// the headers of mode, written by package header as Bouncer's servers
// write them; a denied request is answered 429 with Retry-After.
type window struct {
	c      *clock
	start  time.Time
	limit  int64
	period time.Duration
	mode   header.Mode

	mu       sync.Mutex
	admitted map[int64]int64 // by window
	denied   map[int64]int64
}

func serveWindow(t *testing.T, c *clock, limit int64, period time.Duration, mode header.Mode) (*httptest.Server, *window) {
	t.Helper()
	w := &window{c: c, start: c.Now(), limit: limit, period: period, mode: mode,
		admitted: map[int64]int64{}, denied: map[int64]int64{}}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	return srv, w
}

func (w *window) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	now := w.c.Now()
	i := int64(now.Sub(w.start) / w.period)
	w.mu.Lock()
	allowed := w.admitted[i] < w.limit
	if allowed {
		w.admitted[i]++
	} else {
		w.denied[i]++
	}
	remaining := w.limit - w.admitted[i]
	w.mu.Unlock()
	reset := w.start.Add(time.Duration(i+1) * w.period).Sub(now)
	v := header.Values{Policy: "default", Limit: w.limit, Window: w.period, Remaining: remaining, Reset: reset,
		Denied: !allowed, RetryAfter: reset}
	for _, f := range v.Append(nil, w.mode) {
		rw.Header().Add(f.Name, f.Value)
	}
	if !allowed {
		rw.WriteHeader(http.StatusTooManyRequests)
	}
}

// counts returns the admitted and denied requests by window.
func (w *window) counts() (admitted, denied map[int64]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	admitted, denied = map[int64]int64{}, map[int64]int64{}
	for k, v := range w.admitted {
		admitted[k] = v
	}
	for k, v := range w.denied {
		denied[k] = v
	}
	return admitted, denied
}

func sum(m map[int64]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}
