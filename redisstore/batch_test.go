package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

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

// Concurrent checks of one limit each are sent packed (see check.lua),
// whatever their algorithm: batches of checks the script decides on its
// fast paths alone, and batches where those and checks it hands to its
// general path come in any order — on a standalone server, and on a
// Cluster, whose batches hold the keys of many slots of one node. Each key
// admits exactly its limit's capacity.
func TestPackedChecksStayExact(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) { packedChecksStayExact(t, c) })
}

func packedChecksStayExact(t *testing.T, c rueidis.Client) {
	s := newStore(t, c, redisstore.Options{})
	all := []struct {
		l    bouncer.Limit
		want int64
	}{
		{bouncer.Limit{Name: "gcra", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Hour, Burst: 3}, 3},
		{bouncer.Limit{Name: "tb", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 4}, 4},
		{bouncer.Limit{Name: "leaky", Algorithm: bouncer.LeakyBucket, Rate: 1, Period: time.Hour, Burst: 2}, 2},
		{bouncer.Limit{Name: "fw", Algorithm: bouncer.FixedWindow, Rate: 5, Period: 24 * time.Hour}, 5},
		{bouncer.Limit{Name: "fw-cd", Algorithm: bouncer.FixedWindow, Rate: 6, Period: 24 * time.Hour, ChargeDenied: true}, 6},
		{bouncer.Limit{Name: "fw-ms", Algorithm: bouncer.FixedWindow, Rate: 7, Period: 24*time.Hour + time.Millisecond}, 7},
		{bouncer.Limit{Name: "log", Algorithm: bouncer.SlidingWindowLog, Rate: 4, Period: time.Hour}, 4},
		{bouncer.Limit{Name: "swc", Algorithm: bouncer.SlidingWindowCounter, Rate: 3, Period: time.Hour}, 3},
	}
	const fast = 5 // the first five are decided on the fast paths
	t.Run("fast", func(t *testing.T) { checkPackedExact(t, s, "fast", all[:fast]) })
	t.Run("mixed", func(t *testing.T) { checkPackedExact(t, s, "mixed", all) })
}

func checkPackedExact(t *testing.T, s *redisstore.Store, prefix string, limits []struct {
	l    bouncer.Limit
	want int64
}) {
	const keys, workers, tries = 6, 4, 4
	allowed := make([]atomic.Int64, len(limits)*keys)
	var wg sync.WaitGroup
	for i, lw := range limits {
		for k := range keys {
			for range workers {
				wg.Go(func() {
					req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: fmt.Sprintf("%s-%d", prefix, k), Limits: []bouncer.Limit{lw.l}}}, Cost: 1}
					for range tries {
						d, err := s.Check(context.Background(), req)
						if err != nil || d.Degraded {
							t.Errorf("%s, key %d: %+v, %v", lw.l.Name, k, d, err)
							return
						}
						if d.Allowed {
							allowed[i*keys+k].Add(1)
						}
					}
				})
			}
		}
	}
	wg.Wait()
	for i, lw := range limits {
		for k := range keys {
			if n := allowed[i*keys+k].Load(); n != lw.want {
				t.Errorf("%s, key %d: %d allowed, want %d", lw.l.Name, k, n, lw.want)
			}
		}
	}
}

// CheckEach decides each request as Check would: concurrent CheckEach
// calls of distinct keys admit exactly each limit's capacity, an invalid
// request gets its own error without spoiling the others, on a standalone
// server and on a Cluster (where the requests share batches, one per
// node).
func TestCheckEachStaysExact(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		s := newStore(t, c, redisstore.Options{Prefix: freshPrefix()})
		limits := []bouncer.Limit{
			{Name: "fw", Algorithm: bouncer.FixedWindow, Rate: 5, Period: 24 * time.Hour, ChargeDenied: true},
			{Name: "gcra", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Hour, Burst: 3},
			{Name: "log", Algorithm: bouncer.SlidingWindowLog, Rate: 4, Period: time.Hour},
		}
		want := []int64{5, 3, 4}
		const keys, workers, tries = 8, 4, 4
		allowed := make([]atomic.Int64, keys*len(limits))
		var wg sync.WaitGroup
		for k := range keys {
			for range workers {
				wg.Go(func() {
					rs := make([]bouncer.Request, 0, len(limits)+1)
					for _, l := range limits {
						rs = append(rs, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: fmt.Sprintf("each-%d", k), Limits: []bouncer.Limit{l}}}, Cost: 1})
					}
					rs = append(rs, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "each-invalid"}}, Cost: 1}) // no limits
					ds, errs := make([]bouncer.Decision, len(rs)), make([]error, len(rs))
					for range tries {
						s.CheckEach(context.Background(), rs, ds, errs)
						if !errors.Is(errs[len(limits)], bouncer.ErrInvalidRequest) {
							t.Errorf("invalid request: error %v, want ErrInvalidRequest", errs[len(limits)])
						}
						for i := range limits {
							if errs[i] != nil || ds[i].Degraded {
								t.Errorf("key %d, %s: %+v, %v", k, limits[i].Name, ds[i], errs[i])
								return
							}
							if ds[i].Allowed {
								allowed[k*len(limits)+i].Add(1)
							}
						}
					}
				})
			}
		}
		wg.Wait()
		for k := range keys {
			for i, l := range limits {
				if n := allowed[k*len(limits)+i].Load(); n != want[i] {
					t.Errorf("key %d, %s: %d allowed, want %d", k, l.Name, n, want[i])
				}
			}
		}
	})
}

// fcallCounter is a client that counts the FCALLs it sends and the most
// keys one carried.
type fcallCounter struct {
	rueidis.Client
	calls, maxKeys atomic.Int64
}

func (c *fcallCounter) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if cs := cmd.Commands(); len(cs) > 2 && cs[0] == "FCALL" {
		c.calls.Add(1)
		var n int64
		fmt.Sscan(cs[2], &n)
		for m := c.maxKeys.Load(); n > m && !c.maxKeys.CompareAndSwap(m, n); m = c.maxKeys.Load() {
		}
	}
	return c.Client.Do(ctx, cmd)
}

// CheckEach of many requests sends them in calls of at most Options.Batch
// checks, as concurrent Checks are: one call of thousands of keys would
// hold Redis past the deadline.
func TestCheckEachBatchBound(t *testing.T) {
	c := &fcallCounter{Client: newClient(t, addrs(t, "BOUNCER_REDIS_ADDR"))}
	s := newStore(t, c, redisstore.Options{Batch: 16})
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Hour}
	rs := make([]bouncer.Request, 100)
	for i := range rs {
		rs[i] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: fmt.Sprint("each-", i), Limits: []bouncer.Limit{l}}}, Cost: 1}
	}
	// Connected first: until then CheckEach checks one by one.
	if _, err := s.Check(context.Background(), bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "each-warm", Limits: []bouncer.Limit{l}}}, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	c.calls.Store(0)
	ds, errs := make([]bouncer.Decision, len(rs)), make([]error, len(rs))
	s.CheckEach(context.Background(), rs, ds, errs)
	for i := range rs {
		if errs[i] != nil || !ds[i].Allowed || ds[i].Degraded {
			t.Fatalf("request %d: %+v, %v", i, ds[i], errs[i])
		}
	}
	if m := c.maxKeys.Load(); m > 16 {
		t.Errorf("a call carried %d keys, want at most the batch of 16", m)
	}
	if n := c.calls.Load(); n < 7 {
		t.Errorf("%d calls for 100 checks in batches of 16, want at least 7", n)
	}
}
