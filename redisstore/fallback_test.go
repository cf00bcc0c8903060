package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/storetest"
)

// failingStore returns a store on a client of a real server whose every
// call misses its deadline: its deadline of 1ns has passed before the
// call is sent. The server answers its liveness probes, so the breaker
// stays closed and every check goes to Redis and misses.
func failingStore(t *testing.T, c rueidis.Client, o redisstore.Options) *redisstore.Store {
	t.Helper()
	o.Timeout = time.Nanosecond
	return newStore(t, c, o)
}

// downStore is failingStore whose liveness probes fail, as a dead
// server's would: its first missed deadline opens the breaker, for
// openFor, on the fake clock clock (nil: the real one).
func downStore(t *testing.T, c rueidis.Client, openFor time.Duration, clock func() time.Time) *redisstore.Store {
	t.Helper()
	o := redisstore.Options{Breaker: redisstore.BreakerOptions{OpenFor: openFor}}
	redisstore.SetHealthHooks(&o, clock, func(context.Context, string) error { return errors.New("connection refused") })
	return failingStore(t, c, o)
}

func oneKey(key string, cost int64, limits ...bouncer.Limit) bouncer.Request {
	return bouncer.Request{Cost: cost, Peek: cost == 0, Keys: []bouncer.KeyLimits{{Key: key, Limits: limits}}}
}

// mustCheck checks r, which must not return an error, and returns the
// decision, which must be Degraded as degraded says.
func mustCheck(t *testing.T, s *redisstore.Store, r bouncer.Request, degraded bool) bouncer.Decision {
	t.Helper()
	d, err := s.Check(context.Background(), r)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if d.Degraded != degraded {
		t.Fatalf("Check = %+v; want Degraded %v", d, degraded)
	}
	return d
}

// Limits of the fallback tests: a bucket of 3 that refills once an hour,
// by each policy.
func bucket3(name string, p bouncer.StoreErrorPolicy) bouncer.Limit {
	return bouncer.Limit{Name: name, Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 3, OnStoreError: p}
}

// wantLocal asserts that r, whose binding limit admits capacity, admits
// exactly that many more checks of cost 1 and then denies, all degraded.
func wantLocal(t *testing.T, s *redisstore.Store, r bouncer.Request, capacity int64, name string) {
	t.Helper()
	for i := range capacity {
		d := mustCheck(t, s, r, true)
		if !d.Allowed || d.Remaining != capacity-1-i || d.LimitName != name {
			t.Fatalf("local check %d of %d: %+v; want allowed by %q with %d remaining", i+1, capacity, d, name, capacity-1-i)
		}
	}
	d := mustCheck(t, s, r, true)
	if d.Allowed || d.RetryAfter <= 0 || d.LimitName != name {
		t.Fatalf("local check %d of %d: %+v; want denied by %q with a retry", capacity+1, capacity, d, name)
	}
}

// The failing stores run on the standalone server only: the policies do
// not depend on the topology, and a Cluster client whose calls time out
// closes connections and refreshes its topology in goroutines that
// outlive it.
func TestStoreErrorPolicies(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_ADDR"))
	t.Run("allow", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{})
		for _, p := range []bouncer.StoreErrorPolicy{bouncer.StoreErrorAllow} {
			r := oneKey("user:1", 2, bucket3("open", p))
			for range 5 { // far beyond the capacity: nothing enforces it
				d := mustCheck(t, s, r, true)
				if !d.Allowed || d.Capacity != 3 || d.Remaining != 1 || d.Key != "user:1" || d.LimitName != "open" || d.RetryAfter != 0 {
					t.Fatalf("policy %q: %+v; want allowed, limit 3, 1 remaining, naming the limit", p, d)
				}
			}
		}
	})

	t.Run("default_is_local", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{})
		wantLocal(t, s, oneKey("user:d", 1, bucket3("d", bouncer.StoreErrorDefault)), 3, "d")
	})
	t.Run("deny", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{})
		l := bouncer.Limit{Name: "strict", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute, OnStoreError: bouncer.StoreErrorDeny}
		d := mustCheck(t, s, oneKey("user:1", 1, l), true)
		if d.Allowed || d.RetryAfter <= 0 || d.Capacity != 10 || d.Remaining != 0 || d.Key != "user:1" || d.LimitName != "strict" || d.Delay != 0 {
			t.Fatalf("%+v; want denied by user:1's \"strict\", limit 10, 0 remaining, a positive retry", d)
		}
	})

	t.Run("local", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{})
		l := bucket3("per-instance", bouncer.StoreErrorLocal)
		wantLocal(t, s, oneKey("user:1", 1, l), 3, "per-instance")
		wantLocal(t, s, oneKey("user:2", 1, l), 3, "per-instance") // its own state
	})

	t.Run("store_default_deny", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{OnStoreError: bouncer.StoreErrorDeny})
		if d := mustCheck(t, s, oneKey("k", 1, bucket3("dflt", bouncer.StoreErrorDefault)), true); d.Allowed || d.LimitName != "dflt" {
			t.Errorf("limit with the default policy on a deny store: %+v; want denied", d)
		}
		for range 5 {
			if d := mustCheck(t, s, oneKey("k", 1, bucket3("own", bouncer.StoreErrorAllow)), true); !d.Allowed {
				t.Fatalf("limit with its own allow policy on a deny store: %+v; want allowed", d)
			}
		}
		wantLocal(t, s, oneKey("k", 1, bucket3("mine", bouncer.StoreErrorLocal)), 3, "mine")
	})

	t.Run("store_default_local", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{OnStoreError: bouncer.StoreErrorLocal})
		wantLocal(t, s, oneKey("k", 1, bucket3("dflt", bouncer.StoreErrorDefault)), 3, "dflt")
		for range 5 {
			if d := mustCheck(t, s, oneKey("k", 1, bucket3("own", bouncer.StoreErrorAllow)), true); !d.Allowed {
				t.Fatalf("limit with its own allow policy on a local store: %+v; want allowed", d)
			}
		}
		if d := mustCheck(t, s, oneKey("k", 1, bucket3("closed", bouncer.StoreErrorDeny)), true); d.Allowed {
			t.Errorf("limit with its own deny policy on a local store: %+v; want denied", d)
		}
	})

	t.Run("mixed_deny_wins", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{})
		local := bucket3("l", bouncer.StoreErrorLocal)
		r := bouncer.Request{Cost: 1, Keys: []bouncer.KeyLimits{
			{Key: "k1", Limits: []bouncer.Limit{bucket3("a", bouncer.StoreErrorAllow), local}},
			{Key: "k2", Limits: []bouncer.Limit{bucket3("d", bouncer.StoreErrorDeny), bucket3("d2", bouncer.StoreErrorDeny)}},
		}}
		for range 3 {
			if d := mustCheck(t, s, r, true); d.Allowed || d.Key != "k2" || d.LimitName != "d" || d.RetryAfter <= 0 {
				t.Fatalf("%+v; want denied by k2's \"d\"", d)
			}
		}
		// The denied checks charged nothing locally.
		wantLocal(t, s, oneKey("k1", 1, local), 3, "l")
	})

	t.Run("local_all_or_nothing", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{})
		a := bucket3("a", bouncer.StoreErrorLocal)
		b := bucket3("b", bouncer.StoreErrorLocal)
		b.Burst = 1
		r := bouncer.Request{Cost: 1, Keys: []bouncer.KeyLimits{
			{Key: "k1", Limits: []bouncer.Limit{a}},
			{Key: "k2", Limits: []bouncer.Limit{b}},
		}}
		if d := mustCheck(t, s, r, true); !d.Allowed || d.LimitName != "b" || d.Remaining != 0 {
			t.Fatalf("first check: %+v; want allowed, binding k2's \"b\" with 0 remaining", d)
		}
		for range 3 {
			if d := mustCheck(t, s, r, true); d.Allowed || d.LimitName != "b" || d.Key != "k2" {
				t.Fatalf("check with b exhausted: %+v; want denied by k2's \"b\"", d)
			}
		}
		// k1's "a" was charged by the first check only.
		wantLocal(t, s, oneKey("k1", 1, a), 2, "a")
	})

	t.Run("allow_limits_ignored", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{})
		tiny := bucket3("tiny", bouncer.StoreErrorAllow)
		tiny.Burst = 1
		r := bouncer.Request{Cost: 1, Keys: []bouncer.KeyLimits{
			{Key: "k1", Limits: []bouncer.Limit{tiny}},
			{Key: "k2", Limits: []bouncer.Limit{bucket3("big", bouncer.StoreErrorLocal)}},
		}}
		wantLocal(t, s, r, 3, "big")
	})
}

// A peek (cost 0) is always allowed and charges nothing, whatever the
// policy; under deny it reports the limit as exhausted, as a peek at an
// exhausted limit does.
func TestStoreErrorPeek(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_ADDR"))
	s := failingStore(t, c, redisstore.Options{})
	for _, p := range []bouncer.StoreErrorPolicy{bouncer.StoreErrorAllow, bouncer.StoreErrorDeny, bouncer.StoreErrorLocal} {
		l := bucket3("peeked-"+p.String(), p)
		d := mustCheck(t, s, oneKey("k", 0, l), true)
		if !d.Allowed || d.RetryAfter != 0 || d.Capacity != 3 || d.LimitName != l.Name || d.Key != "k" {
			t.Errorf("peek at a %q limit with Redis failing: %+v; want allowed with no retry, naming the limit", p, d)
		}
		if p == bouncer.StoreErrorDeny && d.Remaining != 0 {
			t.Errorf("peek at a deny limit with Redis failing: %d remaining; want 0: a check would be denied", d.Remaining)
		}
	}
	// The local peek charged nothing.
	wantLocal(t, s, oneKey("k", 1, bucket3("peeked-local", bouncer.StoreErrorLocal)), 3, "peeked-local")
	// A peek at a deny limit and a local limit together is allowed too.
	r := bouncer.Request{Keys: []bouncer.KeyLimits{
		{Key: "k1", Limits: []bouncer.Limit{bucket3("d", bouncer.StoreErrorDeny)}},
		{Key: "k2", Limits: []bouncer.Limit{bucket3("l", bouncer.StoreErrorLocal)}},
	}, Peek: true}
	if d := mustCheck(t, s, r, true); !d.Allowed || d.RetryAfter != 0 {
		t.Errorf("peek at a deny and a local limit with Redis failing: %+v; want allowed with no retry", d)
	}
}

func TestStoreErrorHealth(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_ADDR"))
	ctx := context.Background()
	r := oneKey("k", 1, bucket3("b", bouncer.StoreErrorDefault))

	t.Run("deadlines_missed_breaker_closed", func(t *testing.T) {
		s := failingStore(t, c, redisstore.Options{})
		for range 4 {
			mustCheck(t, s, r, true)
		}
		redisstore.Settle(s)
		st := s.Health()
		if st.Calls != 4 || st.SlowN != 4 || st.Failures != 0 || st.DegradedN != 4 || breakerOf(st) != redisstore.BreakerClosed || opensOf(st) != 0 || st.LastErr == nil {
			t.Fatalf("after 4 checks past their deadline on a live Redis: %+v; want 4 calls, 4 slow, no failure, 4 degraded, breaker closed, a last error", st)
		}
		if err := s.Refund(ctx, r); err == nil {
			t.Fatal("Refund past its deadline: no error")
		}
		st = s.Health()
		if st.Calls != 5 || st.SlowN != 5 || st.DegradedN != 4 {
			t.Fatalf("after a late refund: %+v; want 5 calls, 5 slow, still 4 degraded", st)
		}
		h := s.Health()
		if !h.Connected || len(h.Nodes) != 1 || h.Nodes[0].Addr == "" || h.Nodes[0].SlowN != 5 || h.Nodes[0].Breaker != redisstore.BreakerClosed {
			t.Fatalf("Health() = %+v; want one named node, 5 slow calls, breaker closed", h)
		}
	})

	t.Run("breaker_open", func(t *testing.T) {
		s := downStore(t, c, time.Hour, nil)
		mustCheck(t, s, r, true)
		redisstore.Settle(s) // the probe fails: the breaker opens
		for range 4 {
			mustCheck(t, s, r, true)
		}
		st := s.Health()
		if st.Calls != 1 || st.SlowN != 1 || st.DegradedN != 5 || breakerOf(st) != redisstore.BreakerOpen || opensOf(st) != 1 || st.LastErr == nil {
			t.Fatalf("after 5 checks, the first opening the breaker: %+v; want 1 call, 1 slow, 5 degraded, breaker open once, a last error", st)
		}
		if err := s.Refund(ctx, r); err == nil {
			t.Fatal("Refund with the breaker open: no error")
		}
		if st := s.Health(); st.Calls != 1 {
			t.Fatalf("Refund with the breaker open called Redis: %+v", st)
		}
		reasons := s.Health().Degraded()
		if len(reasons) != 1 || !strings.Contains(reasons[0], "circuit breaker open") || !strings.Contains(reasons[0], "connection refused") {
			t.Fatalf("Health().Degraded() = %q; want the open breaker and why", reasons)
		}
	})

	t.Run("healthy", func(t *testing.T) {
		s := newStore(t, c, redisstore.Options{})
		for range 4 {
			mustCheck(t, s, r, false)
		}
		if st := s.Health(); st.Calls != 4 || st.Failures != 0 || st.SlowN != 0 || st.DegradedN != 0 || breakerOf(st) != redisstore.BreakerClosed || st.LastErr != nil {
			t.Fatalf("after 4 checks on a healthy Redis: %+v; want 4 calls and nothing else", st)
		}
		if reasons := s.Health().Degraded(); reasons != nil {
			t.Fatalf("Health().Degraded() = %q on a healthy Redis; want none", reasons)
		}
	})
}

// A caller that gives up says nothing about Redis, and leaves nothing
// behind: its check returns an error wrapping context.Canceled, no
// decision; its call is neither a failure nor a success to the breaker
// and starts no probe; it charges no local limit, holds no call of its
// lane, and does not make the calls after it run guarded (deadline.go),
// whether its context was canceled before the check or during its call.
func TestCanceledCallerIsNotARedisFailure(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_ADDR"))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	l := bucket3("b", bouncer.StoreErrorDefault)
	r := oneKey("k", 1, l)

	// newCanceledStore makes a store on cc whose probes fail (so that a
	// probe would open the breaker) and whose local store is local; hook,
	// if set, pins the scripts' clock.
	newCanceledStore := func(t *testing.T, cc rueidis.Client, local bouncer.Limiter, hook func() time.Time) *redisstore.Store {
		t.Helper()
		o := redisstore.Options{Local: local}
		redisstore.SetHealthHooks(&o, nil, func(context.Context, string) error { return errors.New("probed") })
		if hook != nil {
			redisstore.PinClock(&o, hook)
		}
		return newStore(t, cc, o)
	}
	// wantGone asserts that a canceled check returned the caller's error.
	wantGone := func(t *testing.T, d bouncer.Decision, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) || d != (bouncer.Decision{}) {
			t.Fatalf("check of a canceled caller: %+v, %v; want no decision and an error wrapping context.Canceled", d, err)
		}
	}
	// wantNothingLeft asserts that the canceled checks of s left nothing
	// behind, and that Redis decides the next check: on a machine so
	// loaded that its call misses the store's deadline, it is degraded,
	// but then for that reason, and allowed by the untouched local limit.
	wantNothingLeft := func(t *testing.T, s *redisstore.Store, local bouncer.Limiter) {
		t.Helper()
		redisstore.Settle(s)
		st := s.Health()
		if st.Failures != 0 || st.SlowN != 0 || st.DegradedN != 0 || breakerOf(st) != redisstore.BreakerClosed || opensOf(st) != 0 || st.LastErr != nil {
			t.Fatalf("after checks of a canceled caller: %+v; want no failure, nothing slow or degraded, no probe and the breaker closed", st)
		}
		if n := redisstore.LaneInFlight(s); n[0] != 0 {
			t.Fatalf("after checks of a canceled caller: %d calls of the lane in flight, want 0", n[0])
		}
		if redisstore.Guarded(s) {
			t.Fatal("after checks of a canceled caller: calls run guarded, as after a connection error or a timeout")
		}
		if d, err := local.Check(context.Background(), oneKey("k", 0, l)); err != nil || d.Remaining != 3 {
			t.Fatalf("local limit after checks of a canceled caller: %+v, %v; want all 3 remaining", d, err)
		}
		d, err := s.Check(context.Background(), r)
		if err != nil || !d.Allowed {
			t.Fatalf("check after the canceled ones: %+v, %v; want allowed", d, err)
		}
		if st := s.Health(); d.Degraded && st.SlowN+st.Failures == 0 {
			t.Fatalf("check after the canceled ones: %+v, degraded with no slow or failed call (%+v): the canceled checks left something in its way", d, st)
		}
	}

	t.Run("not_a_failure", func(t *testing.T) {
		local := memstore.New(memstore.Options{})
		defer local.Close()
		cc := &doneCounter{Client: c}
		s := newCanceledStore(t, cc, local, nil)
		for range 3 {
			d, err := s.Check(canceled, r)
			wantGone(t, d, err)
		}
		rs := []bouncer.Request{r, oneKey("k2", 1, l)}
		ds, errs := make([]bouncer.Decision, len(rs)), make([]error, len(rs))
		s.CheckEach(canceled, rs, ds, errs)
		for i := range rs {
			wantGone(t, ds[i], errs[i])
		}
		// The client never saw them: given a call with a done context, it
		// may dial a connection with it, and fail other callers' calls
		// waiting for that connection with "operation was canceled".
		if n := cc.done.Load(); n != 0 {
			t.Fatalf("%d calls went to the client with the caller's context done; want none", n)
		}
		wantNothingLeft(t, s, local)
	})

	t.Run("canceled_during_the_call", func(t *testing.T) {
		local := memstore.New(memstore.Options{})
		defer local.Close()
		ctx, cancel := context.WithCancel(context.Background())
		// The clock is read as the call is encoded, after the store
		// looked at ctx: the client gets the call with ctx canceled.
		s := newCanceledStore(t, c, local, func() time.Time { cancel(); return time.Now() })
		d, err := s.Check(ctx, r)
		wantGone(t, d, err)
		wantNothingLeft(t, s, local)
	})

	t.Run("canceled_trial", func(t *testing.T) {
		const openFor = time.Second
		clock := storetest.NewClock(time.Now())
		s := downStore(t, c, openFor, clock.Now)
		mustCheck(t, s, r, true)
		redisstore.Settle(s)
		if st := s.Health(); breakerOf(st) != redisstore.BreakerOpen {
			t.Fatalf("after a missed deadline and a failed probe: %+v; want the breaker open", st)
		}
		clock.Advance(3 * openFor / 2) // the longest jittered wait: the next call is a trial
		s.Check(canceled, r)
		if st := s.Health(); breakerOf(st) != redisstore.BreakerOpen || st.SlowN != 1 {
			t.Fatalf("after a canceled trial: %+v; want the breaker still open and 1 slow call: a trial whose caller gave up did not reach Redis", st)
		}
		mustCheck(t, s, r, true) // the next trial misses its deadline
		if st := s.Health(); breakerOf(st) != redisstore.BreakerOpen || st.SlowN != 2 || opensOf(st) != 1 {
			t.Fatalf("after a late trial: %+v; want the breaker open (once) and 2 slow calls", st)
		}
		mustCheck(t, s, r, true) // refused: OpenFor has not passed again
		if st := s.Health(); st.Calls != 3 {
			t.Fatalf("a call went to Redis right after a late trial: %+v; want the 3 calls before", st)
		}
	})
}

// doneCounter is a client that counts the calls it gets with their
// context done.
type doneCounter struct {
	rueidis.Client
	done atomic.Int64
}

func (c *doneCounter) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if ctx.Err() != nil {
		c.done.Add(1)
	}
	return c.Client.Do(ctx, cmd)
}

// A store that connects itself starts while Redis is unreachable: New
// returns at once, checks decide by policy (local by default), marked
// Degraded, Health says why, invalid input is still refused, and Close
// stops the connecting goroutine (goleak checks).
func TestNewWhileRedisUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	s, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption([]string{addr}), Prefix: freshPrefix()})
	if err != nil {
		t.Fatalf("New with Redis unreachable: %v; want a store that decides by policy", err)
	}
	defer s.Close()
	wantLocal(t, s, oneKey("k", 1, bucket3("b", bouncer.StoreErrorDefault)), 3, "b")
	h := s.Health()
	if h.Connected || h.ConnectError == nil || !strings.Contains(h.ConnectError.Error(), "connection refused") || len(h.Degraded()) != 1 {
		t.Fatalf("Health() = %+v, degraded %q; want not connected, with the connection error", h, h.Degraded())
	}
	if st := s.Health(); st.Connected || st.Calls != 0 || st.DegradedN != 4 {
		t.Fatalf("Health() = %+v; want not connected, no call, 4 degraded", st)
	}
	if _, err := s.Check(context.Background(), bouncer.Request{Cost: 1}); !errors.Is(err, bouncer.ErrInvalidRequest) {
		t.Fatalf("an invalid request with Redis unreachable: %v; want ErrInvalidRequest", err)
	}
	if err := s.Refund(context.Background(), oneKey("k", 1, bucket3("b", 0))); err == nil {
		t.Fatal("Refund with Redis unreachable: no error")
	}
}
