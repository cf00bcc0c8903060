package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// A charge is one script call: of every limit of a key on a standalone
// server, and one per group of its keys on a Cluster.
func TestChargeOneCall(t *testing.T) {
	limits := []bouncer.Limit{
		{Name: "window", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Hour},
		{Name: "bucket", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Hour, Burst: 3},
		{Name: "log", Algorithm: bouncer.SlidingWindowLog, Rate: 4, Period: time.Hour},
	}
	ctx := context.Background()
	t.Run("standalone", func(t *testing.T) {
		s := newStore(t, newClient(t, addrs(t, "BOUNCER_REDIS_ADDR")), redisstore.Options{})
		before := s.Health().Calls
		if err := s.Charge(ctx, oneKey("charge-one-call", 5, limits...)); err != nil {
			t.Fatalf("Charge: %v", err)
		}
		if got := s.Health().Calls - before; got != 1 {
			t.Errorf("script calls of a charge of three limits: got %d, want 1", got)
		}
		for _, l := range limits {
			d := mustCheck(t, s, oneKey("charge-one-call", 1, l), false)
			if d.Allowed == (5 > l.Capacity()) || d.Allowed && d.Remaining != l.Capacity()-6 {
				t.Errorf("%s after a charge of 5: %+v", l.Name, d)
			}
		}
	})
	t.Run("cluster", func(t *testing.T) {
		s := newStore(t, newClient(t, addrs(t, "BOUNCER_REDIS_CLUSTER_ADDRS")), redisstore.Options{})
		user, ip := "charge-groups-user", ""
		for j := 0; ip == "" || redisstore.GroupOf(user) == redisstore.GroupOf(ip); j++ {
			ip = fmt.Sprintf("charge-groups-ip-%d", j)
		}
		r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: user, Limits: limits}, {Key: ip, Limits: limits[:1]}}, Cost: 4}
		before := s.Health().Calls
		if err := s.Charge(ctx, r); err != nil {
			t.Fatalf("Charge: %v", err)
		}
		if got := s.Health().Calls - before; got != 2 {
			t.Errorf("script calls of a charge of keys in two groups: got %d, want 2", got)
		}
		for _, k := range []string{user, ip} {
			if d := mustCheck(t, s, oneKey(k, 0, limits[0]), false); d.Remaining != 6 {
				t.Errorf("%s after a charge of 4: Remaining %d, want 6", k, d.Remaining)
			}
		}
	})
}

// Concurrent charges and checks, which a standalone store sends together
// in batched calls, each count exactly once.
func TestBatchedChargesStayExact(t *testing.T) {
	s := newStore(t, newClient(t, addrs(t, "BOUNCER_REDIS_ADDR")), redisstore.Options{})
	limits := []bouncer.Limit{
		{Name: "window", Algorithm: bouncer.FixedWindow, Rate: 1 << 20, Period: 24 * time.Hour},
		{Name: "log", Algorithm: bouncer.SlidingWindowLog, Rate: 1 << 20, Period: time.Hour},
	}
	const keys, workers, rounds = 4, 8, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				r := oneKey(fmt.Sprintf("charge-batch-%d", i%keys), 1, limits...)
				if w%2 == 0 {
					r.Cost = 3
					if err := s.Charge(context.Background(), r); err != nil {
						t.Errorf("Charge: %v", err)
					}
					continue
				}
				if d, err := s.Check(context.Background(), r); err != nil || !d.Allowed || d.Degraded {
					t.Errorf("Check: %+v, %v", d, err)
				}
			}
		})
	}
	wg.Wait()
	// Per key: half the workers charge 3, half check 1, rounds/keys times.
	want := int64(1<<20) - workers/2*(rounds/keys)*4
	for k := range keys {
		for _, l := range limits {
			if d := mustCheck(t, s, oneKey(fmt.Sprintf("charge-batch-%d", k), 0, l), false); d.Remaining != want {
				t.Errorf("key %d, %s: Remaining %d, want %d", k, l.Name, d.Remaining, want)
			}
		}
	}
}

// A charge that cannot reach Redis returns the error, and charges the
// limits with the local policy in the local store, whose checks then see
// the debt; the other limits are not charged anywhere.
func TestChargeRedisDown(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_ADDR"))
	s := failingStore(t, c, redisstore.Options{})
	local, allow := bucket3("local", bouncer.StoreErrorLocal), bucket3("allow", bouncer.StoreErrorAllow)
	if err := s.Charge(context.Background(), oneKey("charge-down", 5, local, allow)); err == nil {
		t.Fatal("Charge with Redis missing every deadline: got nil, want an error")
	}
	d := mustCheck(t, s, oneKey("charge-down", 1, local), true)
	if d.Allowed || d.RetryAfter != 3*time.Hour {
		t.Errorf("local check after a charge of 5 on a bucket of 3: %+v; want denied for 3h (2 of debt and 1)", d)
	}
	if d := mustCheck(t, s, oneKey("charge-down", 1, allow), true); !d.Allowed {
		t.Errorf("allow check: %+v; want allowed", d)
	}
	// An invalid charge is refused before Redis is asked.
	inflight := bouncer.Limit{Name: "inflight", Algorithm: bouncer.Concurrency, Rate: 2, Period: time.Minute}
	if err := s.Charge(context.Background(), oneKey("charge-down", 1, inflight)); err == nil {
		t.Error("Charge of a concurrency limit: got nil, want ErrInvalidRequest")
	}
}
