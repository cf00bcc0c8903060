package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

var shareLimit = bouncer.Limit{Name: "shared", Algorithm: bouncer.FixedWindow, Rate: 100, Period: time.Second}

func sharePairs(n int, prefix string) ([]bouncer.Request, []store.Share) {
	pairs, mine := make([]bouncer.Request, n), make([]store.Share, n)
	for i := range pairs {
		pairs[i] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: fmt.Sprintf("%s-%d", prefix, i), Limits: []bouncer.Limit{shareLimit}}}, Cost: 1}
		mine[i] = store.Share{Instance: "a", Demand: 1.5, Allowance: 10, Window: 7, Used: 90, At: 12, Region: "eu west"}
	}
	return pairs, mine
}

// A pair's shares are a hash beside its state: its name the state hash's
// and the key's digest, so that it is as long whatever the key, in the
// state's slot; its values the share and its expiry on the store's
// clock; its TTL that of its latest share, so that it vanishes with it.
func TestSharesHash(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		clock := storetest.NewClock(storetest.Start)
		var o redisstore.Options
		redisstore.PinClock(&o, clock.Now)
		s := newStore(t, c, o)
		ctx := t.Context()
		exchange := func(inst string, ttl time.Duration) {
			t.Helper()
			pairs, mine := sharePairs(1, "hash")
			mine[0].Instance = inst
			if _, err := s.ExchangeShares(ctx, ttl, pairs, mine); err != nil {
				t.Fatalf("exchange of %s: %v", inst, err)
			}
		}
		key := redisstore.SharesKey(s, shareLimit, "hash-0")
		state, _ := redisstore.StateOf(s, shareLimit, "hash-0")
		long := redisstore.SharesKey(s, shareLimit, strings.Repeat("k", 64<<10))
		if !strings.HasPrefix(key, state+":shares:") || len(key) != len(state)+len(":shares:")+16 {
			t.Errorf("shares key %q: want the state's %q, \":shares:\" and 16 hex digits", key, state)
		}
		if len(long) > len(key)+4 { // their buckets' numbers differ in length
			t.Errorf("shares key of a key of 64 KiB: %d bytes, want about %d", len(long), len(key))
		}
		if redisstore.KeySlot(key) != redisstore.KeySlot(state) {
			t.Errorf("shares key %q in slot %d, its state %q in %d: want one slot", key, redisstore.KeySlot(key), state, redisstore.KeySlot(state))
		}
		pttl := func() int64 {
			t.Helper()
			ms, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			return ms
		}
		exchange("a", time.Minute)
		v, err := c.Do(ctx, c.B().Hget().Key(key).Field("a").Build()).ToString()
		at := storetest.Start.UnixMicro()
		if want := fmt.Sprintf("%d 1.5 10 7 90 12 eu west", at+time.Minute.Microseconds()); err != nil || v != want {
			t.Errorf("a's value: got %q, %v, want %q", v, err, want)
		}
		if ms := pttl(); ms <= 55000 || ms > 60000 {
			t.Errorf("PTTL after a share of a minute: got %d ms, want 60000", ms)
		}
		clock.Advance(30 * time.Second)
		exchange("b", 10*time.Second) // expires before a
		if ms := pttl(); ms <= 25000 || ms > 30000 {
			t.Errorf("PTTL after a second share that expires first: got %d ms, want a's 30000 left", ms)
		}
		exchange("b", time.Minute) // now after a
		if ms := pttl(); ms <= 55000 || ms > 60000 {
			t.Errorf("PTTL after a second share that expires last: got %d ms, want b's 60000", ms)
		}
		clock.Advance(time.Minute)
		exchange("c", 0) // records nothing; a and b have expired
		if n, err := c.Do(ctx, c.B().Exists().Key(key).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("after every share expired: EXISTS %d, %v; want the hash gone", n, err)
		}
	})
}

// An exchange is one call whatever its number of pairs: one in the
// store's count, and one in the count of each node it reaches.
func TestSharesOneCall(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		s := newStore(t, c, redisstore.Options{})
		nodeCalls := func() (n uint64) {
			for _, nh := range s.Health().Nodes {
				n += nh.Calls
			}
			return n
		}
		for _, n := range []int{1, 256} {
			pairs, mine := sharePairs(n, fmt.Sprintf("one-%d", n))
			calls, nodes := s.Health().Calls, nodeCalls()
			if _, err := s.ExchangeShares(t.Context(), time.Minute, pairs, mine); err != nil {
				t.Fatal(err)
			}
			h := s.Health()
			if got := h.Calls - calls; got != 1 {
				t.Errorf("%d pairs: %d calls counted, want 1", n, got)
			}
			if got := nodeCalls() - nodes; got < 1 || got > uint64(len(h.Nodes)) {
				t.Errorf("%d pairs: %d calls counted on %d nodes, want one on each node reached", n, got, len(h.Nodes))
			}
			// A sync of as many pushes, each with a share, is one call too.
			calls, nodes = h.Calls, nodeCalls()
			if _, err := s.SyncShares(t.Context(), time.Minute, pairs, make([]bouncer.Decision, n), syncShares(mine)); err != nil {
				t.Fatal(err)
			}
			h = s.Health()
			if got := h.Calls - calls; got != 1 {
				t.Errorf("a sync of %d pushes: %d calls counted, want 1", n, got)
			}
			if got := nodeCalls() - nodes; got < 1 || got > uint64(len(h.Nodes)) {
				t.Errorf("a sync of %d pushes: %d calls counted on %d nodes, want one on each node reached", n, got, len(h.Nodes))
			}
		}
	})
}

// syncShares is a sync's shares: mine[i] of push i.
func syncShares(mine []store.Share) []store.SyncShare {
	ss := make([]store.SyncShare, len(mine))
	for i, sh := range mine {
		ss[i] = store.SyncShare{Pair: i, Share: sh}
	}
	return ss
}

// A node that lost the library (restarted, FUNCTION FLUSH) gets it again
// from the exchange that finds it missing, which succeeds.
func TestSharesReloadLibrary(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		var o redisstore.Options
		redisstore.FreshLibrary(&o)
		s := newStore(t, c, o)
		pairs, mine := sharePairs(16, "reload")
		if err := redisstore.DeleteLibrary(t.Context(), s, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { redisstore.DeleteLibrary(context.Background(), s, c) })
		if _, err := s.ExchangeShares(t.Context(), time.Minute, pairs, mine); err != nil {
			t.Fatalf("exchange after the library was deleted: %v", err)
		}
		if err := redisstore.DeleteLibrary(t.Context(), s, c); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SyncShares(t.Context(), time.Minute, pairs, make([]bouncer.Decision, len(pairs)), syncShares(mine)); err != nil {
			t.Fatalf("sync after the library was deleted: %v", err)
		}
		for i := range mine {
			mine[i].Instance = "b"
		}
		others, err := s.ExchangeShares(t.Context(), time.Minute, pairs, mine)
		if err != nil || len(others) != len(pairs) || len(others[0]) != 1 || others[0][0].Instance != "a" {
			t.Fatalf("b's exchange: got %+v, %v; want a's share of each pair", others, err)
		}
	})
}

// A caller that canceled gets its error, and the exchange is no call.
func TestSharesCanceled(t *testing.T) {
	s := newStore(t, newClient(t, addrs(t, "BOUNCER_REDIS_ADDR")), redisstore.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	pairs, mine := sharePairs(2, "canceled")
	calls := s.Health().Calls
	if _, err := s.ExchangeShares(ctx, time.Minute, pairs, mine); !errors.Is(err, context.Canceled) {
		t.Errorf("exchange with a canceled context: got %v, want context.Canceled", err)
	}
	if got := s.Health().Calls - calls; got != 0 {
		t.Errorf("%d calls counted, want none", got)
	}
}

// testFailureShares freezes the standalone server: an exchange fails by
// its deadline, and once the breaker is open, at once without a call;
// when the server answers again, exchanges succeed again.
func testFailureShares(t *testing.T, pr *privateRedis) {
	addr := []string{"127.0.0.1:" + strconv.Itoa(pr.port)}
	s := newStore(t, newClient(t, addr), redisstore.Options{Timeout: failureTimeout, Breaker: failureBreaker})
	pairs, mine := sharePairs(8, "frozen")
	failureWaitExchange(t, s, pairs, mine)
	pr.freeze(t, pr.port)
	t.Cleanup(func() { pr.resumeAll(t) })
	start := time.Now()
	_, err := s.ExchangeShares(t.Context(), time.Minute, pairs, mine)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > failureTimeout+returnBound {
		t.Errorf("exchange with Redis frozen: got %v after %v, want a deadline exceeded (deadline %v)", err, took.Round(time.Millisecond), failureTimeout)
	}
	failureWaitBreaker(t, "frozen", s, redisstore.BreakerOpen, recoverBound)
	calls := s.Health().Calls
	if _, err := s.ExchangeShares(t.Context(), time.Minute, pairs, mine); err == nil || !strings.Contains(err.Error(), "circuit breaker open") {
		t.Errorf("exchange with the breaker open: got %v, want the breaker's error", err)
	}
	if _, err := s.SyncShares(t.Context(), time.Minute, pairs, make([]bouncer.Decision, len(pairs)), syncShares(mine)); err == nil || !strings.Contains(err.Error(), "circuit breaker open") {
		t.Errorf("sync with the breaker open: got %v, want the breaker's error", err)
	}
	if got := s.Health().Calls - calls; got != 0 {
		t.Errorf("exchange with the breaker open: %d calls counted, want none", got)
	}
	pr.resumeAll(t)
	failureWaitExchange(t, s, pairs, mine)
}

// failureWaitExchange polls s with exchanges of mine until one succeeds.
func failureWaitExchange(t *testing.T, s *redisstore.Store, pairs []bouncer.Request, mine []store.Share) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if _, err := s.ExchangeShares(t.Context(), time.Minute, pairs, mine); err == nil {
			return
		}
		if time.Since(start) > recoverBound {
			t.Fatalf("no exchange succeeded within %v: %+v", recoverBound, s.Health())
		}
	}
}
