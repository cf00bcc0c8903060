package httplimit_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/memstore"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A shaping leaky bucket holds a request for its Delay, then serves it;
// one that would wait past MaxDelay is refused; a client that goes away
// while held is never served, and its place in the queue is given back.
func TestShapingHoldsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.Options{Now: time.Now}) // the bubble's clock
		defer s.Close()
		shape := bouncer.Limit{Name: "q", Algorithm: bouncer.LeakyBucket, Rate: 10, Period: time.Second, Burst: 20, Shape: true}
		mw, err := httplimit.Middleware(s, []httplimit.Rule{{Name: "shaped", Limits: []bouncer.Limit{shape}}}, httplimit.Options{MaxDelay: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var served []time.Duration
		start := time.Now()
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			served = append(served, time.Since(start))
			mu.Unlock()
		}))
		do := func(ctx context.Context) int {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
			return w.Code
		}
		for i := range 6 {
			if code := do(context.Background()); code != http.StatusOK {
				t.Fatalf("request %d: %d, want 200", i, code)
			}
		}
		// One request every 100 ms: each waits for the one before it.
		for i, at := range served {
			if want := time.Duration(i) * 100 * time.Millisecond; at != want {
				t.Errorf("request %d served at %v, want %v", i, at, want)
			}
		}
		// Six more at once would wait 100-600 ms: the last, past MaxDelay,
		// is refused.
		codes := make(chan int, 6)
		for range 6 {
			go func() { codes <- do(context.Background()) }()
		}
		synctest.Wait()
		n429 := 0
		for range 6 {
			if <-codes == http.StatusTooManyRequests {
				n429++
			}
		}
		if n429 != 1 {
			t.Fatalf("%d of 6 queued requests refused, want 1 (the one past MaxDelay)", n429)
		}
		// A client that goes away while held is not served, and gives its
		// slot back.
		<-time.After(2 * time.Second) // the bubble's fake clock moves on: the queue drains
		before := len(served)
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan int)
		do(context.Background()) // occupies now
		go func() { got <- do(ctx) }()
		synctest.Wait() // held for 100 ms
		cancel()
		<-got
		if len(served) != before+1 {
			t.Fatalf("served %d after the cancelled one, want %d: a cancelled request reached the handler", len(served), before+1)
		}
		if code := do(context.Background()); code != http.StatusOK || served[len(served)-1]-served[len(served)-2] != 100*time.Millisecond {
			t.Fatalf("after the cancellation: %d, waited %v, want 200 after 100 ms (the slot given back)", code, served[len(served)-1]-served[len(served)-2])
		}
	})
}
