package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/storetest"
)

// The script decides a fixed window of whole seconds on a path of its own
// (see check.lua). Random sequences of checks and refunds, with a clock
// that also steps back, must give the decisions of package algo and store
// its very state, byte for byte: batched, unbatched and on a Cluster.
func TestFixedWindowMatchesAlgo(t *testing.T) {
	var limits []bouncer.Limit
	for _, p := range []time.Duration{time.Second, 3 * time.Second, time.Minute, time.Hour, 24 * time.Hour, 1500 * time.Millisecond} {
		for _, rate := range []int64{1, 3, 100} {
			for _, cd := range []bool{false, true} {
				limits = append(limits, bouncer.Limit{Name: "fw", Algorithm: bouncer.FixedWindow, Rate: rate, Period: p, ChargeDenied: cd})
			}
		}
	}
	stores := []struct {
		name string
		env  string
		o    redisstore.Options
	}{
		{"standalone", "BOUNCER_REDIS_ADDR", redisstore.Options{}},
		{"standalone/nobatch", "BOUNCER_REDIS_ADDR", redisstore.Options{NoBatch: true}},
		{"cluster", "BOUNCER_REDIS_CLUSTER_ADDRS", redisstore.Options{}},
	}
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			c := newClient(t, addrs(t, sc.env))
			clock := storetest.NewClock(storetest.Start)
			o := sc.o
			o.Prefix = freshPrefix()
			redisstore.PinClock(&o, clock.Now)
			s := newStore(t, c, o)
			for i, l := range limits {
				t.Run(fmt.Sprintf("%d/%v", i, l), func(t *testing.T) {
					checkFixedWindowSequence(t, c, s, o.Prefix, clock, l, uint64(i))
				})
			}
		})
	}
}

// checkFixedWindowSequence runs one random sequence on a fresh key.
func checkFixedWindowSequence(t *testing.T, c rueidis.Client, s *redisstore.Store, prefix string, clock *storetest.Clock, l bouncer.Limit, seed uint64) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 42))
	key := fmt.Sprintf("fw-seq-%d", seed)
	hash, field := redisstore.StateOf(prefix, l, key)
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}}
	p := int64(l.Period)
	var st algo.State
	for step := range 300 {
		// Mostly forward, sometimes across a boundary, sometimes back.
		var dt int64
		switch rng.IntN(6) {
		case 0:
		case 1:
			dt = rng.Int64N(3) - 1
		case 2:
			now := clock.Now().UnixNano()
			dt = (now/p+1)*p - now + rng.Int64N(3) - 1
		case 3:
			dt = -rng.Int64N(2 * p)
		default:
			dt = rng.Int64N(p)
		}
		clock.Set(clock.Now().Add(time.Duration(dt)))
		now := clock.Now().UnixNano()
		req.Cost = rng.Int64N(l.Rate + 3)
		what := fmt.Sprintf("step %d (at +%v, cost %d)", step, time.Duration(now-storetest.Start.UnixNano()), req.Cost)
		if rng.IntN(8) == 0 {
			if err := s.Refund(ctx, req); err != nil {
				t.Fatalf("%s: Refund: %v", what, err)
			}
			st = algo.Refund(l, st, now, req.Cost)
			if algo.Expiry(l, st) <= now {
				// A refund writes the state back, and deletes it if it
				// is fresh by now: even one whose window a clock that
				// steps back would see again.
				st = algo.State{}
			}
			what += " refund"
		} else {
			d, err := s.Check(ctx, req)
			if err != nil || d.Degraded {
				t.Fatalf("%s: Check: %+v, %v", what, d, err)
			}
			var r algo.Result
			st, r = algo.Check(l, st, now, req.Cost)
			want := storetest.Want{Allowed: r.Allowed, Remaining: r.Remaining, ResetAfter: r.ResetAfter}
			if !r.Allowed {
				want.RetryAfter = r.RetryAfter
			}
			if got := storetest.WantOf(d); got != want {
				t.Fatalf("%s: got %v, want %v", what, got, want)
			}
		}
		v, err := c.Do(ctx, c.B().Hget().Key(hash).Field(field).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			continue // forgotten: fresh, as algo's state may be
		}
		if err != nil {
			t.Fatalf("%s: HGET: %v", what, err)
		}
		if want := strconv.FormatInt(st.T, 10); v != want {
			t.Fatalf("%s: stored %s, want algo's %s", what, v, want)
		}
	}
}
