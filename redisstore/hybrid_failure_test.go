//go:build unix

package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/storetest"
)

// hybridFrozenTimeout is the stores' deadline while Redis is frozen.
// hangBound is how long past it a call may take before it counts as
// hanging: generous, so that only a call waiting for the frozen server
// breaks it.
const (
	hybridFrozenTimeout = 200 * time.Millisecond
	hangBound           = hybridFrozenTimeout + 5*time.Second
)

// TestHybridRedisFrozen runs hybrid limiters on the private standalone
// server of failure_servers_test.go and freezes it (SIGSTOP: it keeps its
// connections and answers nothing) while they hold leases and have usage
// to push. The stores' breakers never open (their probe waits an hour),
// so that they call Redis again as soon as it answers; the limiters and
// the scripts run on a fake clock, so leases and windows last as long as
// the test says, whatever the machine's speed.
func TestHybridRedisFrozen(t *testing.T) {
	pr := startPrivateRedis(t)
	t.Run("LeasesAndSyncs", func(t *testing.T) { testHybridFrozen(t, pr) })
	t.Run("AsyncDenyAcrossWindows", func(t *testing.T) { testHybridFrozenWindowEnds(t, pr) })
	t.Run("Killed", func(t *testing.T) { testHybridKilled(t, pr) })
}

// Redis killed (SIGKILL: a crash; its connections refused until it
// starts again, empty) while the instances hold leases and have usage to
// push: a check with a lease is allowed from it; one without, and a tick,
// return by the deadline, decided by policy; once Redis is back, the
// fleet decides exactly again.
func testHybridKilled(t *testing.T, pr *privateRedis) {
	// The breakers as users get them: a killed Redis refuses connections,
	// they open, and their probes close them once it is back.
	f := privateFleet(t, pr, 3, redisstore.BreakerOptions{})
	lease := bouncer.Limit{Name: "lease", Algorithm: bouncer.FixedWindow, Rate: 1000, Period: time.Hour, Mode: bouncer.Lease, OnStoreError: bouncer.StoreErrorDeny}
	deny := bouncer.Limit{Name: "deny", Algorithm: bouncer.FixedWindow, Rate: 1000, Period: time.Hour, Mode: bouncer.Async, OnStoreError: bouncer.StoreErrorDeny}
	takeLease(t, f, "k-hot", lease)
	if d := timedCheck(t, f.ins[1], hybridRequest("k-async", 1, deny)); !d.Allowed || d.Degraded {
		t.Fatalf("async check with Redis up: %+v, want allowed", d)
	}

	t.Cleanup(func() { pr.script(60*time.Second, "redis-node.sh", "start", strconv.Itoa(pr.port)) })
	pr.node(t, "kill", pr.port)
	for i := range 10 {
		if d := timedCheck(t, f.ins[0], hybridRequest("k-hot", 1, lease)); !d.Allowed || d.Degraded {
			t.Fatalf("check %d with a lease, Redis killed: %+v, want allowed from the lease", i, d)
		}
	}
	if d := timedCheck(t, f.ins[2], hybridRequest("k-cold", 1, lease)); d.Allowed || !d.Degraded {
		t.Errorf("a check without a lease, Redis killed: %+v, want denied by policy and degraded", d)
	}
	timedTick(t, f.ins[1])
	if d := timedCheck(t, f.ins[1], hybridRequest("k-async", 1, deny)); d.Allowed || !d.Degraded {
		t.Errorf("async check under deny while syncs fail: %+v, want denied and degraded", d)
	}

	pr.node(t, "start", pr.port)
	waitDecided(t, f)
	hybridWantExact(t, f, lease)
	syncsBack(t, f.ins[1], hybridRequest("k-async", 1, deny))
}

// frozenFleet makes n instances on pr's standalone server, each with a
// client of its own, and waits until each one's store decides a check in
// Redis (connected, its library loaded).
func frozenFleet(t *testing.T, pr *privateRedis, n int) *hybridFleet {
	t.Helper()
	return privateFleet(t, pr, n, redisstore.BreakerOptions{ProbeTimeout: time.Hour})
}

// privateFleet is frozenFleet with the stores' breakers set by b.
func privateFleet(t *testing.T, pr *privateRedis, n int, b redisstore.BreakerOptions) *hybridFleet {
	t.Helper()
	addr := []string{fmt.Sprintf("127.0.0.1:%d", pr.port)}
	cs := make([]rueidis.Client, n)
	for i := range cs {
		cs[i] = newClient(t, addr)
	}
	so := redisstore.Options{Timeout: hybridFrozenTimeout, Breaker: b}
	f := newHybridFleet(t, cs, so, hybrid.Options{})
	waitDecided(t, f)
	t.Cleanup(func() { pr.resumeAll(t) }) // before the stores close
	return f
}

// waitDecided waits until each of f's stores decides a check in Redis
// (connected, its library loaded, its breaker closed).
func waitDecided(t *testing.T, f *hybridFleet) {
	t.Helper()
	warm := bouncer.Limit{Name: "warm", Algorithm: bouncer.FixedWindow, Rate: bouncer.MaxRate, Period: time.Hour}
	for i, s := range f.shared {
		for start := time.Now(); ; {
			d, err := s.Store.Check(context.Background(), hybridRequest("warm", 1, warm))
			if err == nil && !d.Degraded {
				break
			}
			if time.Since(start) > recoverBound {
				t.Fatalf("instance %d: no check decided by Redis within %v: %+v, %v", i, recoverBound, d, err)
			}
		}
	}
}

// timedCheck checks r with h and fails t if it errs or takes more than
// hangBound.
func timedCheck(t *testing.T, h *hybrid.Limiter, r bouncer.Request) bouncer.Decision {
	t.Helper()
	start := time.Now()
	d, err := h.Check(context.Background(), r)
	if took := time.Since(start); took > hangBound {
		t.Errorf("check of %q took %v: more than the deadline %v and a margin", r.Keys[0].Key, took, hybridFrozenTimeout)
	}
	if err != nil {
		t.Fatalf("check of %q: %v", r.Keys[0].Key, err)
	}
	return d
}

// syncsBack ticks h until its async check r is allowed and not degraded
// (its syncs work again with Redis back), up to failureRounds ticks.
func syncsBack(t *testing.T, h *hybrid.Limiter, r bouncer.Request) {
	t.Helper()
	for i := 0; ; i++ {
		timedTick(t, h)
		d := timedCheck(t, h, r)
		if d.Allowed && !d.Degraded {
			return
		}
		if i == failureRounds {
			t.Fatalf("async check under deny after %d ticks with Redis back: %+v, want allowed", i+1, d)
		}
	}
}

// takeLease checks key under l on instance 0 until it holds a lease of
// at least 10 units. (A lease asked of a Redis late on a loaded machine is
// denied by the policy: it asks again.)
func takeLease(t *testing.T, f *hybridFleet, key string, l bouncer.Limit) {
	t.Helper()
	for i := 0; f.ins[0].Stats().UnitsParked < 10; i++ {
		if i == 1000 {
			t.Fatalf("no lease of 10 units after %d checks: %+v", i, f.ins[0].Stats())
		}
		f.clock.Advance(time.Millisecond)
		timedCheck(t, f.ins[0], hybridRequest(key, 1, l))
	}
}

// timedTick ticks h and fails t if that takes more than hangBound.
func timedTick(t *testing.T, h *hybrid.Limiter) {
	t.Helper()
	start := time.Now()
	h.Tick(context.Background())
	if took := time.Since(start); took > hangBound {
		t.Errorf("a tick took %v: more than the deadline %v and a margin", took, hybridFrozenTimeout)
	}
}

// While Redis is frozen, a check with a lease held is allowed from it
// without a request; one without a lease asks Redis and returns by the
// deadline, decided by its limit's deny policy; a tick's push fails by
// the deadline, and async limits follow their policy without asking Redis.
// Once Redis answers again, a fresh key's fixed window admits exactly its
// rate across the instances, and syncs work again.
func testHybridFrozen(t *testing.T, pr *privateRedis) {
	f := frozenFleet(t, pr, 3)
	lease := bouncer.Limit{Name: "lease", Algorithm: bouncer.FixedWindow, Rate: 1000, Period: time.Hour, Mode: bouncer.Lease, OnStoreError: bouncer.StoreErrorDeny}
	deny := bouncer.Limit{Name: "deny", Algorithm: bouncer.FixedWindow, Rate: 1000, Period: time.Hour, Mode: bouncer.Async, OnStoreError: bouncer.StoreErrorDeny}
	local := bouncer.Limit{Name: "local", Algorithm: bouncer.FixedWindow, Rate: 1000, Period: time.Hour, Mode: bouncer.Async, OnStoreError: bouncer.StoreErrorLocal}

	takeLease(t, f, "hot", lease)
	// Instance 1 has async usage to push.
	for _, l := range []bouncer.Limit{deny, local} {
		if d := timedCheck(t, f.ins[1], hybridRequest("async", 1, l)); !d.Allowed || d.Degraded {
			t.Fatalf("async check of %s with Redis up: %+v, want allowed", l.Name, d)
		}
	}

	pr.freeze(t, pr.port)
	asked := f.shared[0].requests.Load()
	for i := range 10 {
		if d := timedCheck(t, f.ins[0], hybridRequest("hot", 1, lease)); !d.Allowed || d.Degraded {
			t.Fatalf("check %d with a lease, Redis frozen: %+v, want allowed from the lease", i, d)
		}
	}
	if n := f.shared[0].requests.Load() - asked; n != 0 {
		t.Errorf("checks with a lease made %d requests to the frozen Redis, want none", n)
	}
	for _, c := range []struct {
		ins int
		key string
	}{{1, "hot"}, {0, "cold"}} {
		asked := f.shared[c.ins].requests.Load()
		d := timedCheck(t, f.ins[c.ins], hybridRequest(c.key, 1, lease))
		if d.Allowed || !d.Degraded {
			t.Errorf("instance %d's check of %q without a lease, Redis frozen: %+v, want denied by policy and degraded", c.ins, c.key, d)
		}
		if f.shared[c.ins].requests.Load() == asked {
			t.Errorf("instance %d's check of %q without a lease asked Redis nothing", c.ins, c.key)
		}
	}

	// The tick's push fails, or, if the push of so little of the window
	// waits, its probe does: either way the policy decides.
	timedTick(t, f.ins[1])
	asked = f.shared[1].requests.Load()
	if d := timedCheck(t, f.ins[1], hybridRequest("async", 1, deny)); d.Allowed || !d.Degraded {
		t.Errorf("async check under deny while syncs fail: %+v, want denied and degraded", d)
	}
	if d := timedCheck(t, f.ins[1], hybridRequest("async", 1, local)); !d.Allowed || !d.Degraded {
		t.Errorf("async check under local while syncs fail: %+v, want allowed on the view and degraded", d)
	}
	if n := f.shared[1].requests.Load() - asked; n != 0 {
		t.Errorf("async checks made %d requests to the frozen Redis, want none", n)
	}

	pr.resumeAll(t)
	hybridWantExact(t, f, lease)
	syncsBack(t, f.ins[1], hybridRequest("async", 1, deny))
	peek := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "async", Limits: []bouncer.Limit{local}}}, Peek: true}
	if d, err := f.shared[2].Store.Check(context.Background(), peek); err == nil && !d.Degraded {
		t.Logf("Redis counts %d units of the async limit under local, of which the instance admitted 2", local.Rate-d.Remaining)
	}
}

// hybridWantExact checks that the fleet decides exactly while Redis is
// up: a lease limit's fixed window admits exactly its rate of a fresh
// key, the instances checking in turn until each has spent its lease.
// On a loaded machine a lease may miss the deadline and decide by policy
// (a late reply may have charged Redis all the same): that round says
// nothing, and another starts on a fresh key, up to failureRounds times.
func hybridWantExact(t *testing.T, f *hybridFleet, lease bouncer.Limit) {
	t.Helper()
	l := lease
	l.Rate = 30
	for round := 1; ; round++ {
		key := fmt.Sprint("exact-", round)
		admitted, late := int64(0), false
		for i := range 3 * 4 * l.Rate {
			d := timedCheck(t, f.ins[i%3], hybridRequest(key, 1, l))
			if d.Degraded {
				late = true
				break
			}
			if d.Allowed {
				admitted++
			}
		}
		if !late {
			if admitted != l.Rate {
				t.Errorf("with Redis back, a fresh key's window admitted %d across the instances, want %d", admitted, l.Rate)
			}
			return
		}
		if round == failureRounds {
			t.Fatalf("a call missed its deadline in each of %d rounds with Redis back", round)
		}
		t.Logf("round %d: a call missed its deadline (a loaded machine); again on a fresh key", round)
		// A store whose calls were late may answer by policy for a while
		// (a slow node, an open breaker): the next round starts once each
		// decides in Redis again.
		waitDecided(t, f)
	}
}

// An async limit under deny whose syncs failed until its fixed window
// ended decides in Redis again once Redis is back: it has nothing left
// to push (its window's usage is dropped with the window), yet its
// instance must find out that syncs work. (A limiter that tries a sync
// only with usage to push, and admits none under deny while syncs fail,
// never does.)
func testHybridFrozenWindowEnds(t *testing.T, pr *privateRedis) {
	f := frozenFleet(t, pr, 1)
	h := f.ins[0]
	l := bouncer.Limit{Name: "deny", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Second, Mode: bouncer.Async, OnStoreError: bouncer.StoreErrorDeny}
	if d := timedCheck(t, h, hybridRequest("k", 1, l)); !d.Allowed || d.Degraded {
		t.Fatalf("async check with Redis up: %+v, want allowed", d)
	}
	pr.freeze(t, pr.port)
	timedTick(t, h)
	if d := timedCheck(t, h, hybridRequest("k", 1, l)); d.Allowed || !d.Degraded {
		t.Fatalf("async check under deny while syncs fail: %+v, want denied and degraded", d)
	}
	f.clock.Set(storetest.Start.Add(l.Period)) // the next window
	pr.resumeAll(t)
	var d bouncer.Decision
	for range failureRounds {
		f.clock.Advance(hybrid.DefaultSyncInterval)
		timedTick(t, h)
		if d = timedCheck(t, h, hybridRequest("k", 1, l)); d.Allowed && !d.Degraded {
			return
		}
	}
	t.Fatalf("%d ticks after Redis came back, in a fresh window: %+v, want allowed and not degraded (stats %+v)", failureRounds, d, h.Stats())
}
