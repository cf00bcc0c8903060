//go:build unix

package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// TestFailure runs the failure tests on one private set of servers (see
// failure_servers_test.go): Redis stopped, frozen and restarted under each
// StoreErrorPolicy; restarted under the load of the three modes; a
// Cluster master killed; a slot migrated while checks
// run; a paused master; an exchange of async shares on a frozen server. Exactness is not required while Redis fails, but every decision
// must follow the policy and return by its deadline.
func TestFailure(t *testing.T) {
	pr := startPrivateRedis(t)
	t.Run("Standalone", func(t *testing.T) { testFailureStandalone(t, pr) })
	t.Run("StartWhileDown", func(t *testing.T) { testFailureStartWhileDown(t, pr) })
	t.Run("RestartUnderLoad", func(t *testing.T) { testFailureRestartUnderLoad(t, pr) })
	t.Run("FrozenReconnect", func(t *testing.T) { testFailureFrozenReconnect(t, pr) })
	t.Run("FrozenCheckEach", func(t *testing.T) { testFailureFrozenCheckEach(t, pr) })
	t.Run("PausedLane", func(t *testing.T) { testFailurePausedLane(t, pr) })
	t.Run("Shares", func(t *testing.T) { testFailureShares(t, pr) })
	t.Run("ClusterMasterKilled", func(t *testing.T) { testFailureClusterMasterKilled(t, pr) })
	t.Run("ClusterSlotMigration", func(t *testing.T) { testFailureClusterSlotMigration(t, pr) })
}

const (
	// failureTimeout is the stores' deadline (Options.Timeout) in the
	// failure tests.
	failureTimeout = 50 * time.Millisecond
	// returnBound is how long any check may take, deadline included: a
	// generous bound that only a check waiting for Redis beyond its
	// deadline can break. Precise latencies are BenchmarkCheckRedisDown's.
	returnBound = 2 * time.Second
	// recoverBound bounds every wait for Redis to decide again.
	recoverBound = 20 * time.Second
)

var failureBreaker = redisstore.BreakerOptions{ProbeTimeout: 200 * time.Millisecond, OpenFor: 100 * time.Millisecond}

// failurePerHour is a fixed window of rate per hour: exact, and in one
// window for any test's length.
func failurePerHour(name string, rate int64, p bouncer.StoreErrorPolicy) bouncer.Limit {
	return bouncer.Limit{Name: name, Algorithm: bouncer.FixedWindow, Rate: rate, Period: time.Hour, OnStoreError: p}
}

func failureRequest(key string, ls ...bouncer.Limit) bouncer.Request {
	return bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: ls}}, Cost: 1}
}

// failurePolicyStore is a store under test with the policy that decides
// its limits when Redis cannot.
type failurePolicyStore struct {
	name   string
	limitP bouncer.StoreErrorPolicy // its limits' OnStoreError
	want   bouncer.StoreErrorPolicy // what decides them: the limit's or the store's
	s      *redisstore.Store
	opens  uint64 // BreakerOpens when last seen open
}

func (ps *failurePolicyStore) limit(name string, rate int64) bouncer.Limit {
	return failurePerHour(name, rate, ps.limitP)
}

// failureCheck checks r and fails t if the check errs or outlasts
// returnBound.
func failureCheck(t testing.TB, s *redisstore.Store, r bouncer.Request) bouncer.Decision {
	t.Helper()
	start := time.Now()
	d, err := s.Check(context.Background(), r)
	if took := time.Since(start); took > returnBound {
		t.Errorf("check of %q took %v, more than %v", r.Keys[0].Key, took, returnBound)
	}
	if err != nil {
		t.Fatalf("check of %q: %v", r.Keys[0].Key, err)
	}
	return d
}

// failureWantPolicy makes n checks of key under a limit of rate 3 while
// Redis cannot answer, localUsed checks of key having gone to the local
// store before: each must be Degraded and decided by ps's policy (local:
// the local store admits 3 in all).
func failureWantPolicy(t *testing.T, ps *failurePolicyStore, key string, n, localUsed int) {
	t.Helper()
	l := ps.limit("three", 3)
	for i := range n {
		d := failureCheck(t, ps.s, failureRequest(key, l))
		if !d.Degraded {
			t.Fatalf("%s: check %d of %q with Redis down: not Degraded: %+v", ps.name, i+1, key, d)
		}
		var want bool
		switch ps.want {
		case bouncer.StoreErrorAllow:
			want = true
		case bouncer.StoreErrorDeny:
			want = false
		case bouncer.StoreErrorLocal:
			want = localUsed+i < 3
		}
		if d.Allowed != want {
			t.Errorf("%s (%v): check %d of %q with Redis down: Allowed %v, want %v (%+v)", ps.name, ps.want, i+1, key, d.Allowed, want, d)
		}
	}
}

// failureWaitRedis polls s with checks of key (under a limit that always
// allows) until Redis decides one, and returns how long that took.
func failureWaitRedis(t *testing.T, s *redisstore.Store, key string, l bouncer.Limit) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		d := failureCheck(t, s, failureRequest(key, l))
		if !d.Degraded {
			if !d.Allowed {
				t.Errorf("check of %q decided by Redis: denied, want allowed", key)
			}
			return time.Since(start)
		}
		if time.Since(start) > recoverBound {
			t.Fatalf("Redis does not decide checks again %v after it came back (health %+v)", recoverBound, s.Health())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failureWaitBreaker polls s until its breaker is in state, within bound.
func failureWaitBreaker(t *testing.T, name string, s *redisstore.Store, state string, bound time.Duration) redisstore.Health {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		st := s.Health()
		if breakerOf(st) == state {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: breaker %s after %v, want %s (health %+v)", name, breakerOf(st), bound, state, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// failureRounds bounds the rounds of failureWantExact.
const failureRounds = 10

// failureWantExact checks that Redis decides ps's checks exactly while it
// is up: a limit of 3 admits 3 checks of a fresh key, then denies, none
// Degraded. On a loaded machine a check may miss the store's deadline
// (failureTimeout) and decide by policy, and so may the next ones if the
// probe that late call sent misses its own; the round then says nothing
// of exactness (a late reply may have charged Redis all the same), so it
// starts again on a fresh key, up to failureRounds times. Only lateness
// is excused: a check degraded in a round in which the store counted no
// call past its deadline, and no breaker opened for a probe past its
// own, fails the test.
func failureWantExact(t *testing.T, ps *failurePolicyStore, key string) {
	t.Helper()
	l := ps.limit("three", 3)
	for round := 1; ; round++ {
		// Each round starts with Redis deciding and no probe in flight.
		failureWaitRedis(t, ps.s, "ready-"+key, ps.limit("always", bouncer.MaxRate))
		redisstore.Settle(ps.s)
		before := ps.s.Health()
		k := fmt.Sprintf("%s-%d", key, round)
		late := breakerOf(before) != redisstore.BreakerClosed // a probe failed as it settled
		for i := 0; i < 4 && !late; i++ {
			d := failureCheck(t, ps.s, failureRequest(k, l))
			switch {
			case d.Degraded:
				if st := ps.s.Health(); !lateSince(before, st) {
					t.Fatalf("%s: check %d of %q with Redis up: degraded, but no call or probe missed its deadline: %+v (health %+v, before the round %+v)", ps.name, i+1, k, d, st, before)
				}
				late = true
			case d.Allowed != (i < 3):
				t.Errorf("%s: check %d of %q with Redis up: %+v, want Allowed %v and not Degraded", ps.name, i+1, k, d, i < 3)
			}
		}
		if !late {
			return
		}
		if round == failureRounds {
			t.Fatalf("%s: calls missed their deadline in each of %d rounds with Redis up (health %+v)", ps.name, round, ps.s.Health())
		}
		t.Logf("%s: round %d on %q: a call missed its deadline (a loaded machine); again on a fresh key", ps.name, round, k)
	}
}

// lateSince reports whether, between the health snapshots before and
// now, a call missed its deadline, or a breaker opened because a probe
// did: a late call counted just before the snapshot before may send the
// probe that opens the breaker during the round.
func lateSince(before, now redisstore.Health) bool {
	if now.SlowN > before.SlowN {
		return true
	}
	if opensOf(now) == opensOf(before) {
		return false
	}
	for _, n := range now.Nodes {
		if strings.HasPrefix(n.Reason, "no reply to a PING within") ||
			strings.Contains(n.Reason, context.DeadlineExceeded.Error()) ||
			strings.HasPrefix(n.Reason, "most calls missed their deadline") {
			return true
		}
	}
	return false
}

// failureBackground keeps checking while servers fail, and checks every
// decision against its store's policy. Its limit never denies in Redis (nor in the
// local store), so every denial must be the deny policy's.
type failureBackground struct {
	name   string
	policy bouncer.StoreErrorPolicy // what decides when Redis cannot
	n      atomic.Int64
	deg    atomic.Int64
	maxLat atomic.Int64
	degBy  map[string]*atomic.Int64 // if set: degraded checks of each key, counted before run
	mu     sync.Mutex
	errs   []string
}

func (bg *failureBackground) fail(format string, args ...any) {
	bg.mu.Lock()
	defer bg.mu.Unlock()
	if len(bg.errs) < 10 {
		bg.errs = append(bg.errs, fmt.Sprintf(format, args...))
	}
}

// record checks one decision.
func (bg *failureBackground) record(key string, d bouncer.Decision, err error, took time.Duration) {
	bg.n.Add(1)
	for {
		m := bg.maxLat.Load()
		if int64(took) <= m || bg.maxLat.CompareAndSwap(m, int64(took)) {
			break
		}
	}
	if took > returnBound {
		bg.fail("check of %q took %v (deadline %v)", key, took, failureTimeout)
	}
	if err != nil {
		bg.fail("check of %q: error %v", key, err)
		return
	}
	if !d.Degraded {
		if !d.Allowed {
			bg.fail("check of %q decided by Redis: denied, want allowed: %+v", key, d)
		}
		return
	}
	bg.deg.Add(1)
	if n, ok := bg.degBy[key]; ok {
		n.Add(1)
	}
	if want := bg.policy != bouncer.StoreErrorDeny; d.Allowed != want {
		bg.fail("degraded check of %q under %v: Allowed %v, want %v: %+v", key, bg.policy, d.Allowed, want, d)
	}
}

// run checks keys in turn with s until stop is closed.
func (bg *failureBackground) run(s *redisstore.Store, keys []string, l bouncer.Limit, stop <-chan struct{}, pause time.Duration) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := keys[i%len(keys)]
		start := time.Now()
		d, err := s.Check(context.Background(), failureRequest(key, l))
		bg.record(key, d, err, time.Since(start))
		time.Sleep(pause)
	}
}

func (bg *failureBackground) report(t *testing.T) {
	t.Helper()
	bg.mu.Lock()
	defer bg.mu.Unlock()
	for _, e := range bg.errs {
		t.Errorf("%s: %s", bg.name, e)
	}
	t.Logf("%s: %d background checks, %d degraded, slowest %v", bg.name, bg.n.Load(), bg.deg.Load(), time.Duration(bg.maxLat.Load()).Round(time.Microsecond))
}

// failureRedisRate counts the checks Redis decides in d.
func failureRedisRate(t *testing.T, s *redisstore.Store, l bouncer.Limit, d time.Duration) int {
	t.Helper()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		if dec := failureCheck(t, s, failureRequest("throughput", l)); !dec.Degraded {
			n++
		}
	}
	return n
}

// testFailureStandalone freezes, then stops and restarts the standalone
// server while checks run, with a store per policy (set on the limits and
// as the store's default).
func testFailureStandalone(t *testing.T, pr *privateRedis) {
	addr := []string{fmt.Sprintf("127.0.0.1:%d", pr.port)}
	// Whatever happens, the server runs again at the end.
	t.Cleanup(func() { pr.script(60*time.Second, "redis-node.sh", "start", strconv.Itoa(pr.port)) })
	D, A, N, L := bouncer.StoreErrorDefault, bouncer.StoreErrorAllow, bouncer.StoreErrorDeny, bouncer.StoreErrorLocal
	cases := []struct {
		name               string
		limitP, storeP, by bouncer.StoreErrorPolicy
	}{
		{"limit-allow", A, D, A},
		{"limit-deny", N, D, N},
		{"limit-local", L, D, L},
		{"store-allow", D, A, A},
		{"store-deny", D, N, N},
		{"store-local", D, L, L},
		{"default", D, D, L},
		{"limit-local-over-store-deny", L, N, L},
		{"limit-allow-over-store-local", A, L, A},
	}
	var stores []*failurePolicyStore
	for _, c := range cases {
		s := newStore(t, newClient(t, addr), redisstore.Options{
			Timeout:      failureTimeout,
			OnStoreError: c.storeP,
			Breaker:      failureBreaker,
		})
		stores = append(stores, &failurePolicyStore{name: c.name, limitP: c.limitP, want: c.by, s: s})
	}
	t.Cleanup(func() { pr.resumeAll(t) }) // a frozen server first, then the clients close
	// each runs f for every store at once, as parallel subtests of a
	// subtest named phase, and stops the test if one failed.
	each := func(phase string, f func(t *testing.T, ps *failurePolicyStore)) {
		t.Helper()
		ok := t.Run(phase, func(t *testing.T) {
			for _, ps := range stores {
				t.Run(ps.name, func(t *testing.T) {
					t.Parallel()
					f(t, ps)
				})
			}
		})
		if !ok {
			t.FailNow()
		}
	}

	// Redis up: Redis decides, exactly.
	each("up", func(t *testing.T, ps *failurePolicyStore) {
		failureWaitRedis(t, ps.s, "warm", ps.limit("always", bouncer.MaxRate)) // connected, script loaded
		failureWantExact(t, ps, "up")
	})
	always := func(ps *failurePolicyStore) bouncer.Limit { return ps.limit("always", bouncer.MaxRate) }

	// Checks keep running in the background throughout.
	stop := make(chan struct{})
	var bgs []*failureBackground
	var wg sync.WaitGroup
	for _, ps := range stores {
		bg := &failureBackground{name: ps.name, policy: ps.want}
		bgs = append(bgs, bg)
		wg.Go(func() { bg.run(ps.s, []string{"bg1", "bg2"}, always(ps), stop, 2*time.Millisecond) })
	}
	stopped := false
	stopBackground := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopBackground) // before the stores close
	baseline := failureRedisRate(t, stores[0].s, always(stores[0]), 100*time.Millisecond)

	// breakerOpened waits for every store's breaker to open (again).
	breakerOpened := func(phase string) {
		t.Helper()
		each(phase+"-breaker-opens", func(t *testing.T, ps *failurePolicyStore) {
			st := failureWaitBreaker(t, ps.name, ps.s, redisstore.BreakerOpen, returnBound)
			if opensOf(st) <= ps.opens {
				t.Errorf("BreakerOpens %d, want more than %d", opensOf(st), ps.opens)
			}
			if st.LastErr == nil {
				t.Error("no LastError")
			}
			ps.opens = opensOf(st)
		})
	}
	// recovered waits for Redis to decide every store's checks again.
	recovered := func(phase string, since time.Time) {
		t.Helper()
		var mu sync.Mutex
		var slowest time.Duration
		each(phase+"-recovers", func(t *testing.T, ps *failurePolicyStore) {
			failureWaitRedis(t, ps.s, "back-"+phase, always(ps))
			took := time.Since(since)
			mu.Lock()
			slowest = max(slowest, took)
			mu.Unlock()
			failureWaitBreaker(t, ps.name, ps.s, redisstore.BreakerClosed, returnBound)
			failureWantExact(t, ps, "after-"+phase) // fresh state, 3 then deny
		})
		t.Logf("after %s: Redis decides every store's checks again %v after it came back", phase, slowest.Round(time.Millisecond))
	}

	// Redis frozen (SIGSTOP): calls hang until their deadline.
	pr.freeze(t, pr.port)
	each("frozen", func(t *testing.T, ps *failurePolicyStore) { failureWantPolicy(t, ps, "frozen", 6, 0) })
	breakerOpened("frozen")
	time.Sleep(2 * failureBreaker.OpenFor) // probes go out, and fail
	each("frozen-probed", func(t *testing.T, ps *failurePolicyStore) { failureWantPolicy(t, ps, "frozen", 2, 6) })
	pr.resumeAll(t)
	recovered("frozen", time.Now())

	// Redis stopped (SHUTDOWN): calls fail at once.
	pr.node(t, "stop", pr.port)
	each("stopped", func(t *testing.T, ps *failurePolicyStore) { failureWantPolicy(t, ps, "down", 6, 0) })
	breakerOpened("stopped")
	time.Sleep(2 * failureBreaker.OpenFor)
	each("stopped-probed", func(t *testing.T, ps *failurePolicyStore) { failureWantPolicy(t, ps, "down", 2, 6) })

	// Redis back, empty.
	pr.node(t, "start", pr.port)
	back := time.Now()
	recovered("restart", back)

	// Throughput: checks Redis decides per 100ms, against the baseline
	// before the failures. Logged, not asserted: it depends on the machine.
	full := time.Duration(-1)
	var rates []int
	for time.Since(back) < 5*time.Second {
		n := failureRedisRate(t, stores[0].s, always(stores[0]), 100*time.Millisecond)
		rates = append(rates, n)
		if n*10 >= baseline*8 { // 80% of the baseline rate
			full = time.Since(back)
			break
		}
	}
	t.Logf("throughput: %d checks per 100ms before the failures; per 100ms after the restart: %v; back to 80%% %v after the restart (-1: not within 5s)",
		baseline, rates, full.Round(time.Millisecond))

	stopBackground()
	for _, bg := range bgs {
		bg.report(t)
	}
	for _, ps := range stores {
		// A late reply on a loaded machine may have sent a probe that
		// opened the breaker, which, with no check running, stays open:
		// one goes to Redis again, and closes it.
		redisstore.Settle(ps.s)
		failureWaitRedis(t, ps.s, "final", always(ps))
		st := ps.s.Health()
		t.Logf("%s: %+v", ps.name, st)
		if st.DegradedN == 0 || st.Failures == 0 || st.SlowN == 0 || breakerOf(st) != redisstore.BreakerClosed {
			t.Errorf("%s: health %+v: want DegradedN, Failures and SlowN > 0, breaker closed", ps.name, st)
		}
	}
}

// testFailureStartWhileDown makes a store on the stopped standalone
// server: it decides by policy meanwhile, and in Redis once the server
// is back, without being made again.
func testFailureStartWhileDown(t *testing.T, pr *privateRedis) {
	addr := []string{fmt.Sprintf("127.0.0.1:%d", pr.port)}
	t.Cleanup(func() { pr.script(60*time.Second, "redis-node.sh", "start", strconv.Itoa(pr.port)) })
	pr.node(t, "stop", pr.port)
	s, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption(addr), Prefix: freshPrefix(), Timeout: failureTimeout})
	if err != nil {
		t.Fatalf("New with the server stopped: %v", err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.WaitConnected(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitConnected with the server stopped: %v; want the context's deadline", err)
	}
	always := failurePerHour("always", bouncer.MaxRate, bouncer.StoreErrorDefault)
	if d := failureCheck(t, s, failureRequest("down", always)); !d.Degraded || !d.Allowed {
		t.Fatalf("check with the server stopped: %+v; want degraded and allowed (local)", d)
	}
	pr.node(t, "start", pr.port)
	wait, cancelWait := context.WithTimeout(context.Background(), time.Minute)
	defer cancelWait()
	if err := s.WaitConnected(wait); err != nil {
		t.Fatalf("WaitConnected once the server started: %v", err)
	}
	took := failureWaitRedis(t, s, "up", always)
	t.Logf("Redis decides %v after the server started", took.Round(time.Millisecond))
	h := s.Health()
	if !h.Connected || h.ConnectError != nil {
		t.Fatalf("Health() once Redis decides: %+v; want connected", h)
	}
	// A loaded machine may make calls miss their deadline, and a probe
	// miss its own; nothing else may be wrong.
	for _, why := range h.Degraded() {
		if !strings.Contains(why, ": slow since ") && !strings.Contains(why, "no reply to a PING within") {
			t.Errorf("Health().Degraded() once Redis decides: %q", why)
		}
	}
}

// failureClusterStore makes a store on the private Cluster's client c.
func failureClusterStore(t *testing.T, c rueidis.Client, timeout time.Duration, p bouncer.StoreErrorPolicy) (*redisstore.Store, string) {
	t.Helper()
	prefix := freshPrefix()
	return newStore(t, c, redisstore.Options{Prefix: prefix, Timeout: timeout, OnStoreError: p, Breaker: failureBreaker}), prefix
}

// testFailureFrozenReconnect sends every check to a frozen standalone
// server (its breaker never opens), so that each one times out and the
// next must connect anew: the server's kernel accepts the connection, but
// the handshake gets no answer. Once the store has seen a call fail, its
// calls run guarded (deadline.go), and each check must still return close
// to its deadline. The bound is the deadline plus 500ms: tight enough to
// catch a client that waits out a timer of its own (rueidis v1.0.79
// closes a connection whose handshake failed with a PING it waits up to
// one second for), loose enough for a moment of a loaded machine — and a
// guard that does not hold makes every reconnecting check wait, so an
// attempt with one check past the bound is made again, up to three times.
//
// A check that starts before the store has seen a call fail (the first of
// each caller, as a rule) runs unguarded (deadline.go): it is not held to
// the bound, only counted and logged; but the guard must turn on.
func testFailureFrozenReconnect(t *testing.T, pr *privateRedis) {
	addr := []string{fmt.Sprintf("127.0.0.1:%d", pr.port)}
	t.Cleanup(func() { pr.resumeAll(t) })
	for _, tc := range []struct {
		timeout  time.Duration
		parallel int
	}{{failureTimeout, 1}, {failureTimeout, 4}, {redisstore.DefaultTimeout, 1}, {redisstore.DefaultTimeout, 4}} {
		timeout, parallel := tc.timeout, tc.parallel
		t.Run(fmt.Sprintf("deadline=%v/callers=%d", timeout, parallel), func(t *testing.T) {
			l := failurePerHour("always", bouncer.MaxRate, bouncer.StoreErrorAllow)
			bound := timeout + 500*time.Millisecond
			for attempt := 1; ; attempt++ {
				s := frozenStore(t, pr, addr, timeout, l)
				var mu sync.Mutex
				var slowest, firstSlowest time.Duration
				unguarded := 0
				var wg sync.WaitGroup
				for range parallel {
					wg.Go(func() {
						for range 20 {
							guarded := redisstore.Guarded(s)
							start := time.Now()
							d, err := s.Check(context.Background(), failureRequest("frozen", l))
							took := time.Since(start)
							mu.Lock()
							if guarded {
								slowest = max(slowest, took)
							} else {
								unguarded++
								firstSlowest = max(firstSlowest, took)
							}
							mu.Unlock()
							if err != nil || !d.Degraded || !d.Allowed {
								t.Errorf("check with Redis frozen: %+v, %v; want degraded and allowed", d, err)
							}
						}
					})
				}
				wg.Wait()
				pr.resumeAll(t)
				t.Logf("attempt %d: slowest of %d guarded checks with Redis frozen: %v; %d unguarded, slowest %v (deadline %v); health %+v",
					attempt, 20*parallel-unguarded, slowest.Round(time.Millisecond), unguarded, firstSlowest.Round(time.Millisecond), timeout, s.Health())
				if unguarded == 20*parallel {
					t.Fatalf("all %d checks ran unguarded: the calls after a failure are not guarded", unguarded)
				}
				if slowest <= bound {
					return
				}
				if attempt == 3 {
					t.Fatalf("in each of %d attempts a guarded check with Redis frozen took more than %v with a deadline of %v (last %v): the deadline is not kept (see redisstore/deadline.go)", attempt, bound, timeout, slowest.Round(time.Millisecond))
				}
			}
		})
	}
}

// frozenStore makes a store on the private standalone server at addr with
// deadline timeout and a breaker that never opens, waits until Redis
// decides a check under l (connected, with the script loaded), then
// freezes the server until t ends.
func frozenStore(t *testing.T, pr *privateRedis, addr []string, timeout time.Duration, l bouncer.Limit) *redisstore.Store {
	t.Helper()
	s := newStore(t, newClient(t, addr), redisstore.Options{
		Timeout: timeout,
		Breaker: redisstore.BreakerOptions{ProbeTimeout: time.Hour},
	})
	for start := time.Now(); failureCheck(t, s, failureRequest("warm", l)).Degraded; {
		if time.Since(start) > recoverBound {
			t.Fatalf("no check decided by Redis within %v: %+v", recoverBound, s.Health())
		}
	}
	pr.freeze(t, pr.port)
	t.Cleanup(func() { pr.resumeAll(t) })
	return s
}

// testFailureFrozenCheckEach freezes the standalone server while callers
// of CheckEach, each with three checks, wait in the store's queue: every
// check of every caller must return by its deadline, under the policy.
// The checks of one caller wait on one timer (see waiter.fire), which
// fires once, for whichever of them waits then; the others must see the
// deadline passed rather than wait for it again. The callers' own
// contexts, of a minute, only keep a failing test from hanging.
func testFailureFrozenCheckEach(t *testing.T, pr *privateRedis) {
	l := failurePerHour("each", bouncer.MaxRate, bouncer.StoreErrorAllow)
	s := frozenStore(t, pr, []string{fmt.Sprintf("127.0.0.1:%d", pr.port)}, failureTimeout, l)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := range 5 {
				rs := make([]bouncer.Request, 3)
				for k := range rs {
					rs[k] = failureRequest(fmt.Sprintf("each-%d-%d-%d", g, i, k), l)
				}
				ds, errs := make([]bouncer.Decision, len(rs)), make([]error, len(rs))
				start := time.Now()
				s.CheckEach(ctx, rs, ds, errs)
				if took := time.Since(start); took > failureTimeout+returnBound {
					t.Errorf("CheckEach of 3 with Redis frozen took %v, deadline %v", took.Round(time.Millisecond), failureTimeout)
				}
				for k := range rs {
					if errs[k] != nil || !ds[k].Degraded || !ds[k].Allowed {
						t.Errorf("check %d of 3 with Redis frozen: %+v, %v; want degraded and allowed", k, ds[k], errs[k])
					}
				}
			}
		})
	}
	wg.Wait()
}

// testFailurePausedLane pauses the standalone server (CLIENT PAUSE) while
// many callers check, with a deadline longer than the pause: at most
// InFlight calls of the lane are in flight at any time, the others' checks
// wait and go out in batches once the pause ends, every check is decided
// by Redis, and afterwards the lane runs nothing (goleak checks the
// package for goroutines left behind).
func testFailurePausedLane(t *testing.T, pr *privateRedis) {
	c := newClient(t, []string{fmt.Sprintf("127.0.0.1:%d", pr.port)})
	const inFlight = 2
	s := newStore(t, c, redisstore.Options{InFlight: inFlight, Timeout: 20 * time.Second})
	l := failurePerHour("paused", bouncer.MaxRate, bouncer.StoreErrorAllow)
	failureWaitRedis(t, s, "warm", l)
	const pause = 1000 * time.Millisecond
	if err := c.Do(context.Background(), c.B().ClientPause().Timeout(pause.Milliseconds()).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			r := failureRequest(fmt.Sprintf("paused-%d", i), l)
			if d, err := s.Check(context.Background(), r); err != nil || !d.Allowed || d.Degraded {
				t.Errorf("check %d: %+v, %v; want allowed by Redis", i, d, err)
			}
		})
	}
	// Sampled until every check returned, however long a loaded machine
	// takes to start the callers.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	most := 0
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for sampling := true; sampling; {
		most = max(most, redisstore.LaneInFlight(s)[0])
		select {
		case <-done:
			sampling = false
		case <-tick.C:
		}
	}
	if most != inFlight {
		t.Errorf("the paused server's lane had at most %d calls in flight, want %d", most, inFlight)
	}
	redisstore.WaitLanes(s)
	if n := redisstore.LaneInFlight(s)[0]; n != 0 {
		t.Errorf("%d calls in flight once every check returned and the lane's goroutines ended", n)
	}
}
