package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// Concurrent checks of several limits and algorithms, which a standalone
// store merges into batched script calls, decide exactly as one at a time:
// each key admits exactly its binding capacity, all or nothing.
func TestBatchedChecksStayExact(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_ADDR"))
	s := newStore(t, c, redisstore.Options{})
	limits := []bouncer.Limit{
		{Name: "window", Algorithm: bouncer.FixedWindow, Rate: 5, Period: 24 * time.Hour},
		{Name: "bucket", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Hour, Burst: 3},
		{Name: "log", Algorithm: bouncer.SlidingWindowLog, Rate: 4, Period: time.Hour},
	}
	const keys, tries = 24, 8
	allowed := make([]atomic.Int64, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for range 4 {
			wg.Go(func() {
				req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: fmt.Sprintf("batch-%d", k), Limits: limits}}, Cost: 1}
				for range tries {
					d, err := s.Check(context.Background(), req)
					if err != nil || d.Degraded {
						t.Errorf("key %d: %+v, %v", k, d, err)
						return
					}
					if d.Allowed {
						allowed[k].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	for k := range allowed {
		if n := allowed[k].Load(); n != 3 {
			t.Errorf("key %d: %d allowed, want 3 (the bucket's burst binds)", k, n)
		}
	}
}
