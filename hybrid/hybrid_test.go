package hybrid_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counting is a shared store that counts the requests it decides, and
// can be made to fail: down, it answers every check as a store that
// cannot reach Redis does with a deny policy (degraded), or with err.
type counting struct {
	bouncer.Limiter
	checks, refunds atomic.Int64
	down            atomic.Bool
	err             error
}

func (c *counting) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	c.checks.Add(1)
	if c.down.Load() {
		if c.err != nil {
			return bouncer.Decision{}, c.err
		}
		return bouncer.Decision{Degraded: true, RetryAfter: time.Second}, nil
	}
	return c.Limiter.Check(ctx, r)
}

func (c *counting) Refund(ctx context.Context, r bouncer.Request) error {
	c.refunds.Add(1)
	return c.Limiter.Refund(ctx, r)
}

func (c *counting) Reset(ctx context.Context, r bouncer.Request) error {
	return bouncer.Reset(ctx, c.Limiter, r)
}

// ExchangeShares passes shares to the memory store under it, which keeps
// them, or fails while the store is down.
func (c *counting) ExchangeShares(ctx context.Context, ttl time.Duration, pairs []bouncer.Request, mine []store.Share) ([][]store.Share, error) {
	if c.down.Load() {
		return nil, errors.New("down")
	}
	return c.Limiter.(store.Sharer).ExchangeShares(ctx, ttl, pairs, mine)
}

// SyncShares passes a sync to the memory store under it, its pushes
// counted as checks, or fails while the store is down.
func (c *counting) SyncShares(ctx context.Context, ttl time.Duration, pushes []bouncer.Request, ds []bouncer.Decision, shares []store.SyncShare) ([][]store.Share, error) {
	if c.down.Load() {
		return nil, errors.New("down")
	}
	c.checks.Add(int64(len(pushes)))
	return c.Limiter.(store.Sharer).SyncShares(ctx, ttl, pushes, ds, shares)
}

// fleet is n hybrid limiters on one shared store, on one fake clock.
type fleet struct {
	clock  *storetest.Clock
	shared *counting
	ins    []*hybrid.Limiter
}

func newFleet(t *testing.T, n int, o hybrid.Options) *fleet {
	t.Helper()
	f := &fleet{clock: storetest.NewClock(storetest.Start)}
	ms := memstore.New(memstore.Options{Now: f.clock.Now})
	t.Cleanup(func() { ms.Close() })
	f.shared = &counting{Limiter: ms}
	o.Now, o.Manual = f.clock.Now, true
	for range n {
		h := hybrid.New(f.shared, nil, o)
		t.Cleanup(func() { h.Close() })
		f.ins = append(f.ins, h)
	}
	return f
}

func (f *fleet) tick() {
	for _, h := range f.ins {
		h.Tick(context.Background())
	}
}

func one(key string, cost int64, l bouncer.Limit) bouncer.Request {
	return bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: cost}
}

func check(t *testing.T, l bouncer.Limiter, r bouncer.Request) bouncer.Decision {
	t.Helper()
	d, err := l.Check(context.Background(), r)
	if err != nil {
		t.Fatalf("Check(%+v): %v", r, err)
	}
	return d
}

// admission is one allowed check: when, which key, how many units.
type admission struct {
	at   time.Time
	key  string
	cost int64
}

// load runs a seeded stream of checks of l on keys through the fleet:
// instance i takes a share weights[i] of the checks, the clock moves
// 0–step between checks, and every instance ticks every interval. It
// returns the admissions and how many checks it made.
func (f *fleet) load(t *testing.T, seed uint64, checks int, keys []string, l bouncer.Limit, weights []float64, step, interval time.Duration) ([]admission, int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []admission
	nextTick := f.clock.Now().Add(interval)
	for range checks {
		f.clock.Advance(time.Duration(rng.Int64N(int64(step) + 1)))
		for !f.clock.Now().Before(nextTick) {
			f.tick()
			nextTick = nextTick.Add(interval)
		}
		i, x := 0, rng.Float64()
		for i < len(weights)-1 && x >= weights[i] {
			x -= weights[i]
			i++
		}
		key := keys[rng.IntN(len(keys))]
		cost := int64(1)
		if rng.IntN(8) == 0 {
			cost = 1 + rng.Int64N(3)
		}
		if d := check(t, f.ins[i], one(key, cost, l)); d.Allowed {
			out = append(out, admission{f.clock.Now(), key, cost})
		}
	}
	return out, checks
}

// perWindow sums admissions per key and fixed window of period.
func perWindow(as []admission, period time.Duration) map[string]int64 {
	m := map[string]int64{}
	for _, a := range as {
		w := a.at.UnixNano() / int64(period)
		m[fmt.Sprintf("%s@%d", a.key, w)] += a.cost
	}
	return m
}

// In lease mode no fixed window admits more than its rate, across three
// instances with skewed load, while the shared store decides far fewer
// requests than there are checks.
func TestLeaseFixedWindowNeverOver(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			f := newFleet(t, 3, hybrid.Options{})
			l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 200, Period: time.Second, Mode: bouncer.Lease}
			as, n := f.load(t, seed, 30000, []string{"a", "b"}, l, []float64{0.6, 0.3, 0.1}, time.Millisecond, 100*time.Millisecond)
			admitted := int64(0)
			for w, got := range perWindow(as, l.Period) {
				admitted += got
				if got > l.Rate {
					t.Errorf("window %s admitted %d, over the rate %d", w, got, l.Rate)
				}
			}
			calls := f.shared.checks.Load()
			if calls*5 > int64(n) {
				t.Errorf("%d checks made %d shared requests: leases should make far fewer", n, calls)
			}
			// 30 000 checks over about 15 s on two keys ask about 1 000 units
			// a second per key against 200: every window should fill, less
			// what leases leave parked.
			windows := int64(len(perWindow(as, l.Period)))
			if admitted < windows*l.Rate*9/10 {
				t.Errorf("admitted %d in %d windows of %d: leases left too much unspent", admitted, windows, l.Rate)
			}
			t.Logf("%d checks, %d admitted in %d windows, %d shared requests, stats %+v", n, admitted, windows, calls, f.ins[0].Stats())
		})
	}
}

// maxInSpan is the most units admitted of key in any span of length d.
func maxInSpan(as []admission, key string, d time.Duration) int64 {
	var ks []admission
	for _, a := range as {
		if a.key == key {
			ks = append(ks, a)
		}
	}
	best, sum, j := int64(0), int64(0), 0
	for i := range ks {
		sum += ks[i].cost
		for ks[i].at.Sub(ks[j].at) > d {
			sum -= ks[j].cost
			j++
		}
		best = max(best, sum)
	}
	return best
}

// A bucket in lease mode admits at most its burst, what it refills in the
// span, and LeaseBound more, in any span.
func TestLeaseBucketBound(t *testing.T) {
	for _, alg := range []bouncer.Algorithm{bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			o := hybrid.Options{LeaseTime: 200 * time.Millisecond}
			f := newFleet(t, 3, o)
			l := bouncer.Limit{Name: "b", Algorithm: alg, Rate: 100, Period: time.Second, Burst: 20, Mode: bouncer.Lease}
			as, _ := f.load(t, 7, 20000, []string{"k"}, l, []float64{0.5, 0.25, 0.25}, time.Millisecond, 100*time.Millisecond)
			extra := hybrid.LeaseBound(l, o.LeaseTime)
			for _, span := range []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 3 * time.Second} {
				bound := l.Burst + (l.Rate*int64(span)+int64(l.Period)-1)/int64(l.Period) + extra
				if got := maxInSpan(as, "k", span); got > bound {
					t.Errorf("span %v: admitted %d, over the bound %d (burst %d, refill, lease %d)", span, got, bound, l.Burst, extra)
				}
			}
		})
	}
}

// One instance alone in lease mode decides a fixed window or a bucket as
// the shared store would, and in async mode a fixed window: every check
// allowed or denied alike, on the same seeded stream. (An async bucket's
// usage reaches the shared store up to an interval late, when it may
// have refilled to its burst meanwhile: it can deny up to rate ×
// interval early.)
func TestOneInstanceAsStrict(t *testing.T) {
	limits := []bouncer.Limit{
		{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 30, Period: time.Second},
		{Name: "t", Algorithm: bouncer.TokenBucket, Rate: 30, Period: time.Second, Burst: 10},
		{Name: "g", Algorithm: bouncer.GCRA, Rate: 30, Period: time.Second, Burst: 10},
	}
	for _, mode := range []bouncer.Mode{bouncer.Lease, bouncer.Async} {
		for _, l := range limits {
			if mode == bouncer.Async && l.Algorithm != bouncer.FixedWindow {
				continue
			}
			t.Run(mode.String()+"/"+l.Algorithm.String(), func(t *testing.T) {
				clock := storetest.NewClock(storetest.Start)
				strict := memstore.New(memstore.Options{Now: clock.Now})
				shared := memstore.New(memstore.Options{Now: clock.Now})
				defer strict.Close()
				defer shared.Close()
				h := hybrid.New(shared, nil, hybrid.Options{Now: clock.Now, Manual: true})
				defer h.Close()
				hl := l
				hl.Mode = mode
				rng := rand.New(rand.NewPCG(11, 12))
				next := clock.Now()
				for i := range 5000 {
					clock.Advance(time.Duration(rng.Int64N(int64(20 * time.Millisecond))))
					if !clock.Now().Before(next) {
						h.Tick(context.Background())
						next = clock.Now().Add(100 * time.Millisecond)
					}
					cost := 1 + rng.Int64N(2)
					want := check(t, strict, one("k", cost, l))
					got := check(t, h, one("k", cost, hl))
					if got.Allowed != want.Allowed {
						t.Fatalf("check %d (cost %d at %v): hybrid allowed %v, strict %v", i, cost, clock.Now().Sub(storetest.Start), got.Allowed, want.Allowed)
					}
				}
			})
		}
	}
}

// A denial is cached until its retry-after for its cost or more, and no
// longer: checks of less go to the shared store, and so do checks after.
func TestOverLimitCache(t *testing.T) {
	f := newFleet(t, 2, hybrid.Options{})
	h := f.ins[1]
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Second, Mode: bouncer.Lease}
	check(t, f.ins[0], one("k", 3, l))
	d := check(t, h, one("k", 3, l))
	if d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("second check of 3 out of 5: got %+v, want denied with a retry-after", d)
	}
	calls := f.shared.checks.Load()
	f.clock.Advance(d.RetryAfter / 2)
	if d := check(t, h, one("k", 3, l)); d.Allowed || f.shared.checks.Load() != calls {
		t.Fatalf("before T, cost 3: got %+v and %d shared requests, want a cached denial", d, f.shared.checks.Load()-calls)
	}
	if h.Stats().CacheHits != 1 {
		t.Errorf("cache hits: %d, want 1", h.Stats().CacheHits)
	}
	if d := check(t, h, one("k", 2, l)); !d.Allowed {
		t.Fatalf("before T, cost 2 (2 left): got %+v, want allowed by the shared store", d)
	}
	// Another limit for the key (an override) is not the cached one.
	over := l
	over.Rate = 50
	if d := check(t, h, one("k", 3, over)); !d.Allowed {
		t.Fatalf("an override of 50: got %+v, want allowed", d)
	}
	f.clock.Advance(d.RetryAfter)
	calls = f.shared.checks.Load()
	if d := check(t, h, one("k", 3, l)); !d.Allowed || f.shared.checks.Load() == calls {
		t.Fatalf("after T: got %+v with %d shared requests, want allowed by the shared store", d, f.shared.checks.Load()-calls)
	}
}

// A reset drops the cached denial.
func TestResetDropsCache(t *testing.T) {
	f := newFleet(t, 1, hybrid.Options{})
	h := f.ins[0]
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 1, Period: time.Hour, Mode: bouncer.Lease}
	check(t, h, one("k", 1, l))
	if d := check(t, h, one("k", 1, l)); d.Allowed {
		t.Fatalf("second check of 1: got %+v, want denied", d)
	}
	if err := h.Reset(context.Background(), one("k", 1, l)); err != nil {
		t.Fatal(err)
	}
	if d := check(t, h, one("k", 1, l)); !d.Allowed {
		t.Fatalf("after a reset: got %+v, want allowed", d)
	}
}

// The pre-throttle denies only what the instance's own admissions already
// fill: the shared store, which counts them and more, would deny it too.
func TestPreThrottleDeniesOnlyOverLimit(t *testing.T) {
	f := newFleet(t, 3, hybrid.Options{})
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 40, Period: time.Second, Mode: bouncer.Lease}
	rng := rand.New(rand.NewPCG(5, 6))
	own := make([]map[int64]int64, 3)
	for i := range own {
		own[i] = map[int64]int64{}
	}
	next := f.clock.Now()
	for range 20000 {
		f.clock.Advance(time.Duration(rng.Int64N(int64(time.Millisecond))))
		if !f.clock.Now().Before(next) {
			f.tick()
			next = f.clock.Now().Add(100 * time.Millisecond)
		}
		i := 0 // the hot instance, alone in most windows
		if rng.IntN(32) == 0 {
			i = 1 + rng.IntN(2)
		}
		cost := 1 + rng.Int64N(2)
		w := f.clock.Now().UnixNano() / int64(l.Period)
		before := f.ins[i].Stats().Throttled
		d := check(t, f.ins[i], one("hot", cost, l))
		if f.ins[i].Stats().Throttled > before && own[i][w]+cost <= l.Rate {
			t.Fatalf("instance %d throttled a check of %d with %d of %d admitted in its window", i, cost, own[i][w], l.Rate)
		}
		if d.Allowed {
			own[i][w] += cost
		}
	}
	if f.ins[0].Stats().Throttled == 0 {
		t.Error("the hot instance was never throttled locally")
	}
}

// An instance that dies holding leases gives nothing back, and the limit
// still holds; its units come back with the next window.
func TestCrashedInstanceUnitsExpire(t *testing.T) {
	f := newFleet(t, 3, hybrid.Options{})
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 100, Period: time.Second, Mode: bouncer.Lease}
	// Checks until the instance holds units of a lease (a lease may run
	// out on any one check).
	dead := int64(0)
	for dead < 60 || f.ins[0].Stats().UnitsParked == 0 {
		f.clock.Advance(time.Millisecond)
		if check(t, f.ins[0], one("k", 1, l)).Allowed {
			dead++
		}
		if dead > 90 {
			t.Fatal("the hot instance holds no lease")
		}
	}
	parked := f.ins[0].Stats().UnitsParked
	f.ins = f.ins[1:] // instance 0 is gone: no Tick, no Close
	admitted := int64(0)
	for range 500 {
		if check(t, f.ins[0], one("k", 1, l)).Allowed {
			admitted++
		}
	}
	if admitted+dead > l.Rate {
		t.Fatalf("the window admitted %d after %d and a lease of %d, over %d", admitted, dead, parked, l.Rate)
	}
	f.clock.Set(storetest.Start.Add(l.Period))
	admitted = 0
	for range 500 {
		if check(t, f.ins[1], one("k", 1, l)).Allowed {
			admitted++
		}
	}
	if admitted != l.Rate {
		t.Fatalf("the next window admitted %d, want all %d back", admitted, l.Rate)
	}
}

// Async mode stays within its bound: per fixed window, at most the rate
// and (instances − 1) × AsyncBound more; the pushes found what they
// report as over-admitted.
func TestAsyncWithinBound(t *testing.T) {
	o := hybrid.Options{SyncInterval: 50 * time.Millisecond}
	f := newFleet(t, 3, o)
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 100, Period: time.Second, Mode: bouncer.Async}
	as, n := f.load(t, 9, 30000, []string{"a", "b", "c"}, l, []float64{0.4, 0.3, 0.3}, time.Millisecond, o.SyncInterval)
	bound := l.Rate + 2*hybrid.AsyncBound(l, o.SyncInterval)
	worst := int64(0)
	for w, got := range perWindow(as, l.Period) {
		worst = max(worst, got)
		if got > bound {
			t.Errorf("window %s admitted %d, over the bound %d", w, got, bound)
		}
	}
	if calls := f.shared.checks.Load(); calls*5 > int64(n) {
		t.Errorf("%d checks made %d shared requests", n, calls)
	}
	t.Logf("worst window %d of %d (bound %d); over-admitted by pushes: %d", worst, l.Rate, bound, f.ins[0].Stats().OverAdmitted+f.ins[1].Stats().OverAdmitted+f.ins[2].Stats().OverAdmitted)
}

// While the shared store cannot answer, a lease already held keeps
// serving until it ends; then the store's degraded answer decides.
func TestLeaseOutlivesOutage(t *testing.T) {
	f := newFleet(t, 1, hybrid.Options{LeaseTime: time.Second})
	h := f.ins[0]
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.TokenBucket, Rate: 1000, Period: time.Second, Burst: 1000, Mode: bouncer.Lease}
	for range 100 {
		f.clock.Advance(time.Millisecond)
		check(t, h, one("k", 1, l))
	}
	if h.Stats().UnitsParked < 10 {
		t.Fatalf("parked %d units, want a lease of at least 10", h.Stats().UnitsParked)
	}
	f.shared.down.Store(true)
	calls := f.shared.checks.Load()
	for range 10 {
		if d := check(t, h, one("k", 1, l)); !d.Allowed || d.Degraded {
			t.Fatalf("with a lease during an outage: got %+v, want allowed from the lease", d)
		}
	}
	if f.shared.checks.Load() != calls {
		t.Fatal("a check with a lease went to the shared store")
	}
	f.clock.Advance(2 * time.Second)
	if d := check(t, h, one("k", 1, l)); d.Allowed || !d.Degraded {
		t.Fatalf("after the lease, during an outage: got %+v, want the store's degraded denial", d)
	}
	f.shared.err = errors.New("broken")
	if _, err := h.Check(context.Background(), one("k", 1, l)); err == nil {
		t.Fatal("a failing shared store: got no error")
	}
}

// Async limits follow their policy while syncs fail: deny denies,
// allow allows, local keeps deciding on the view; all degraded.
func TestAsyncPolicyWhileSyncFails(t *testing.T) {
	for _, p := range []bouncer.StoreErrorPolicy{bouncer.StoreErrorAllow, bouncer.StoreErrorDeny, bouncer.StoreErrorLocal} {
		t.Run(p.String(), func(t *testing.T) {
			f := newFleet(t, 1, hybrid.Options{})
			h := f.ins[0]
			l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 3, Period: time.Hour, Mode: bouncer.Async, OnStoreError: p}
			check(t, h, one("k", 1, l))
			f.shared.down.Store(true)
			h.Tick(context.Background())
			// Allowed or not, the pre-throttle still holds the instance to
			// the limit, from when syncs fail (before, the view does): 3
			// more under allow; the view's 2 under local.
			var allowed int
			for range 5 {
				d := check(t, h, one("k", 1, l))
				if (d.Allowed || p == bouncer.StoreErrorDeny) && !d.Degraded {
					t.Fatalf("while syncs fail: got %+v, want degraded", d)
				}
				if d.Allowed {
					allowed++
				}
			}
			want := map[bouncer.StoreErrorPolicy]int{bouncer.StoreErrorAllow: 3, bouncer.StoreErrorDeny: 0, bouncer.StoreErrorLocal: 2}[p]
			if allowed != want {
				t.Fatalf("allowed %d of 5, want %d", allowed, want)
			}
			f.shared.down.Store(false)
			h.Tick(context.Background())
			if d := check(t, h, one("k", 1, l)); d.Degraded {
				t.Fatalf("after syncs work again: got %+v, want not degraded", d)
			}
		})
	}
}

// A request mixing strict and lease limits is all or nothing: denied by
// its lease limit, the strict limit's charge is given back.
func TestMixedAllOrNothing(t *testing.T) {
	f := newFleet(t, 1, hybrid.Options{})
	h := f.ins[0]
	strict := bouncer.Limit{Name: "s", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Hour}
	lease := bouncer.Limit{Name: "l", Algorithm: bouncer.FixedWindow, Rate: 2, Period: time.Hour, Mode: bouncer.Lease}
	r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{strict, lease}}}, Cost: 1}
	for i := range 5 {
		d := check(t, h, r)
		if want := i < 2; d.Allowed != want {
			t.Fatalf("check %d: got %+v, want allowed %v", i, d, want)
		}
	}
	d := check(t, f.shared.Limiter, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{strict}}}, Peek: true})
	if d.Remaining != 8 {
		t.Fatalf("the strict limit has %d left, want 8: denied checks were charged", d.Remaining)
	}
}

// The limiter passes the conformance suite with strict limits: it is the
// shared store then.
func TestConformanceStrict(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
		ms := memstore.New(memstore.Options{Now: clock.Now})
		h := hybrid.New(ms, nil, hybrid.Options{Now: clock.Now, Manual: true})
		t.Cleanup(func() { h.Close(); ms.Close() })
		return h
	})
}

// CheckEach decides each request as Check would: strict ones together in
// the shared store, lease ones here, invalid ones with their error.
func TestCheckEach(t *testing.T) {
	f := newFleet(t, 1, hybrid.Options{})
	h := f.ins[0]
	strict := bouncer.Limit{Name: "s", Algorithm: bouncer.FixedWindow, Rate: 1, Period: time.Hour}
	lease := bouncer.Limit{Name: "l", Algorithm: bouncer.FixedWindow, Rate: 1, Period: time.Hour, Mode: bouncer.Lease}
	rs := []bouncer.Request{one("a", 1, strict), one("b", 1, lease), one("c", 1, strict), {Cost: 1}, one("b", 1, lease)}
	ds, errs := bouncer.CheckEach(context.Background(), h, rs, nil, nil)
	for i, want := range []bool{true, true, true, false, false} {
		if (errs[i] != nil) != (i == 3) {
			t.Fatalf("request %d: error %v", i, errs[i])
		}
		if ds[i].Allowed != want {
			t.Errorf("request %d: allowed %v, want %v", i, ds[i].Allowed, want)
		}
	}
	if calls := f.shared.checks.Load(); calls != 3 {
		t.Errorf("%d shared requests, want 3 (two strict, one lease; the second lease check is denied by the pre-throttle)", calls)
	}
	ds, _ = bouncer.CheckEach(context.Background(), h, rs[:1], ds, errs)
	if ds[0].Allowed {
		t.Error("a strict key checked again: allowed, want denied")
	}
}

// A refund of async units not pushed yet takes them off the next push
// and gives them back to the view; the shared store, which never counted
// them, is not given units it did not charge.
func TestAsyncRefundBeforePush(t *testing.T) {
	f := newFleet(t, 1, hybrid.Options{})
	h := f.ins[0]
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Hour, Mode: bouncer.Async}
	strict := l
	strict.Mode = bouncer.Strict
	check(t, h, one("k", 3, l))
	h.Tick(context.Background()) // the shared store counts 3
	check(t, h, one("k", 2, l))  // pending: 2
	if err := h.Refund(context.Background(), one("k", 2, l)); err != nil {
		t.Fatal(err)
	}
	h.Tick(context.Background())
	if d := check(t, f.shared.Limiter, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{strict}}}, Peek: true}); d.Remaining != 2 {
		t.Fatalf("the shared store has %d left, want 2 (3 pushed, the refunded 2 never)", d.Remaining)
	}
	if d := check(t, h, one("k", 2, l)); !d.Allowed {
		t.Fatalf("after the refund: got %+v, want 2 allowed", d)
	}
	if d := check(t, h, one("k", 1, l)); d.Allowed {
		t.Fatalf("over: got %+v, want denied", d)
	}
}

// A bucket's cached denial also denies a smaller cost that the remaining
// could not pass, as much sooner as the units it needs less, and no
// longer: the bucket refills one unit an interval.
func TestOverLimitCacheSmallerCost(t *testing.T) {
	f := newFleet(t, 2, hybrid.Options{})
	l := bouncer.Limit{Name: "g", Algorithm: bouncer.GCRA, Rate: 10, Period: time.Second, Burst: 5, Mode: bouncer.Lease}
	if d := check(t, f.ins[0], one("k", 5, l)); !d.Allowed {
		t.Fatalf("the burst: got %+v", d)
	}
	d := check(t, f.ins[1], one("k", 3, l))
	if d.Allowed || d.RetryAfter != 300*time.Millisecond {
		t.Fatalf("3 of an empty bucket: got %+v, want denied for 300ms", d)
	}
	calls := f.shared.checks.Load()
	f.clock.Advance(50 * time.Millisecond)
	if d := check(t, f.ins[1], one("k", 1, l)); d.Allowed || d.RetryAfter != 50*time.Millisecond || f.shared.checks.Load() != calls {
		t.Fatalf("1 at 50ms: got %+v with %d shared requests, want a cached denial for 50ms more", d, f.shared.checks.Load()-calls)
	}
	f.clock.Advance(50 * time.Millisecond)
	if d := check(t, f.ins[1], one("k", 1, l)); !d.Allowed {
		t.Fatalf("1 at 100ms, a unit refilled: got %+v, want allowed", d)
	}
}

// A bucket far over its rate on every instance is held by each until it
// could fill a lease: the shared store decides a small part of the checks,
// and the units admitted are nearly those strict mode admits on the same
// seeded stream.
func TestLeaseBucketOverload(t *testing.T) {
	units := map[bouncer.Mode]int64{}
	calls := map[bouncer.Mode]int64{}
	for _, m := range []bouncer.Mode{bouncer.Strict, bouncer.Lease} {
		f := newFleet(t, 3, hybrid.Options{})
		l := bouncer.Limit{Name: "b", Algorithm: bouncer.GCRA, Rate: 100, Period: time.Second, Burst: 20, Mode: m}
		as, _ := f.load(t, 42, 4000, []string{"k"}, l, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, time.Millisecond, 100*time.Millisecond)
		for _, a := range as {
			units[m] += a.cost
		}
		calls[m] = f.shared.checks.Load()
	}
	if units[bouncer.Lease] < units[bouncer.Strict]*90/100 || units[bouncer.Lease] > units[bouncer.Strict]+hybrid.LeaseBound(bouncer.Limit{Algorithm: bouncer.GCRA, Rate: 100, Period: time.Second, Burst: 20}, hybrid.DefaultLeaseTime) {
		t.Errorf("units admitted: lease %d, strict %d: want at least 90%% of strict, at most LeaseBound more", units[bouncer.Lease], units[bouncer.Strict])
	}
	if calls[bouncer.Lease]*10 > calls[bouncer.Strict] {
		t.Errorf("shared requests: lease %d, strict %d: want 10x fewer", calls[bouncer.Lease], calls[bouncer.Strict])
	}
	t.Logf("units: lease %d, strict %d; shared requests: lease %d, strict %d", units[bouncer.Lease], units[bouncer.Strict], calls[bouncer.Lease], calls[bouncer.Strict])
}

// An async pair that admitted more than its limit's capacity before a
// sync pushes it in parts of at most the capacity (a larger push could
// never pass), admits nothing while it owes the rest, and is counted
// whole in the shared store in the end.
func TestAsyncPushInParts(t *testing.T) {
	f := newFleet(t, 1, hybrid.Options{})
	h := f.ins[0]
	l := bouncer.Limit{Name: "t", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 4, Mode: bouncer.Async}
	strict := l
	strict.Mode = bouncer.Strict
	peek := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{strict}}}, Peek: true}
	// 4 at once, and 1 more refilled 100ms later: 5 before the first sync.
	for range 4 {
		check(t, h, one("k", 1, l))
	}
	f.clock.Advance(100 * time.Millisecond)
	if d := check(t, h, one("k", 1, l)); !d.Allowed {
		t.Fatalf("a refilled unit: got %+v", d)
	}
	f.shared.down.Store(true) // the shared bucket refills meanwhile, not charged
	h.Tick(context.Background())
	f.shared.down.Store(false)
	h.Tick(context.Background()) // 4 of the 5 (the capacity), 1 owed
	if d := check(t, f.shared.Limiter, peek); d.Remaining != 0 {
		t.Fatalf("after the first push: %d left in the shared bucket, want 0", d.Remaining)
	}
	if d := check(t, h, one("k", 1, l)); d.Allowed {
		t.Fatalf("a pair that owes a unit: got %+v, want denied", d)
	}
	f.clock.Advance(100 * time.Millisecond) // one unit refilled in the shared bucket
	h.Tick(context.Background())            // the unit owed
	if d := check(t, f.shared.Limiter, peek); d.Remaining != 0 {
		t.Fatalf("after the debt: %d left in the shared bucket, want 0", d.Remaining)
	}
	f.clock.Advance(100 * time.Millisecond)
	h.Tick(context.Background())
	if d := check(t, h, one("k", 1, l)); !d.Allowed {
		t.Fatalf("the debt paid and a unit refilled: got %+v, want allowed", d)
	}
}

// Lease mode denies almost nothing more than strict mode under a load
// spread evenly over the instances: below 1% of the checks more, at 80%
// of the limit and at 100% of it, on the same seeded stream, for a fixed
// window and a GCRA.
func TestLeaseFalseDenials(t *testing.T) {
	for _, alg := range []bouncer.Algorithm{bouncer.FixedWindow, bouncer.GCRA} {
		for _, load := range []float64{0.8, 1.0} {
			t.Run(fmt.Sprintf("%s/%.0f%%", alg, 100*load), func(t *testing.T) {
				l := bouncer.Limit{Name: "u", Algorithm: alg, Rate: 300, Period: time.Second}
				if alg.UsesBurst() {
					l.Burst = 30
				}
				clock := storetest.NewClock(storetest.Start)
				strict := memstore.New(memstore.Options{Now: clock.Now})
				shared := memstore.New(memstore.Options{Now: clock.Now})
				defer strict.Close()
				defer shared.Close()
				var ins []*hybrid.Limiter
				for range 3 {
					h := hybrid.New(shared, nil, hybrid.Options{Now: clock.Now, Manual: true})
					defer h.Close()
					ins = append(ins, h)
				}
				leased := l
				leased.Mode = bouncer.Lease
				rng := rand.New(rand.NewPCG(3, uint64(100*load)))
				mean := float64(l.Period) / (4 * float64(l.Rate) * load) // four keys, each at load
				next := clock.Now()
				const checks = 20000
				var strictDenied, leaseDenied int
				for i := range checks {
					clock.Advance(time.Duration(rng.ExpFloat64() * mean))
					if !clock.Now().Before(next) {
						for _, h := range ins {
							h.Tick(context.Background())
						}
						next = clock.Now().Add(100 * time.Millisecond)
					}
					key := fmt.Sprint("k", rng.IntN(4))
					if !check(t, strict, one(key, 1, l)).Allowed {
						strictDenied++
					}
					if !check(t, ins[i%3], one(key, 1, leased)).Allowed {
						leaseDenied++
					}
				}
				if extra := leaseDenied - strictDenied; extra*100 >= checks {
					t.Errorf("lease mode denied %d, strict %d, of %d checks: %d more, want under 1%%", leaseDenied, strictDenied, checks, extra)
				}
				t.Logf("denied: lease %d, strict %d, of %d", leaseDenied, strictDenied, checks)
			})
		}
	}
}

// An async fixed window far below its limit pushes nothing (its units
// wait, and go with the window if it ends first): a tick only peeks, to
// learn whether the shared store answers. Once its units near a
// sixteenth of what is left, they are pushed; and while the shared store
// cannot answer, the policy decides though nothing was pushed.
func TestAsyncWaitsFarBelow(t *testing.T) {
	f := newFleet(t, 1, hybrid.Options{})
	h := f.ins[0]
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 160, Period: time.Hour, Mode: bouncer.Async, OnStoreError: bouncer.StoreErrorDeny}
	strict := l
	strict.Mode = bouncer.Strict
	peek := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{strict}}}, Peek: true}
	for range 9 {
		check(t, h, one("k", 1, l))
	}
	h.Tick(context.Background())
	if d := check(t, f.shared.Limiter, peek); d.Remaining != l.Rate {
		t.Fatalf("9 of 160 pending: the shared store counts %d, want nothing pushed", l.Rate-d.Remaining)
	}
	if h.Stats().Syncs != 0 {
		t.Fatalf("syncs: %d, want 0", h.Stats().Syncs)
	}
	check(t, h, one("k", 1, l)) // 10 of 160: a sixteenth
	h.Tick(context.Background())
	if d := check(t, f.shared.Limiter, peek); d.Remaining != l.Rate-10 {
		t.Fatalf("10 of 160 pending: the shared store counts %d, want 10 pushed", l.Rate-d.Remaining)
	}
	check(t, h, one("k", 1, l)) // 1 pending, far below what is left
	f.shared.down.Store(true)
	h.Tick(context.Background())
	if d := check(t, h, one("k", 1, l)); d.Allowed || !d.Degraded {
		t.Fatalf("the shared store down, nothing to push: got %+v, want denied by policy", d)
	}
	f.shared.down.Store(false)
	h.Tick(context.Background())
	if d := check(t, h, one("k", 1, l)); !d.Allowed || d.Degraded {
		t.Fatalf("the shared store back: got %+v, want allowed", d)
	}
}

// signaling is a shared store that says on pushed when it is asked
// to charge units.
type signaling struct {
	bouncer.Limiter
	pushed chan int64
}

func (s *signaling) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	if r.Cost > 0 {
		select {
		case s.pushed <- r.Cost:
		default:
		}
	}
	return s.Limiter.Check(ctx, r)
}

// Without Manual, the limiter's own goroutine pushes async usage every
// SyncInterval, and Close stops it (goleak checks that it is gone).
func TestBackgroundSync(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	defer ms.Close()
	shared := &signaling{Limiter: ms, pushed: make(chan int64, 1)}
	h := hybrid.New(shared, nil, hybrid.Options{SyncInterval: 10 * time.Millisecond})
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 3, Period: time.Hour, Mode: bouncer.Async}
	check(t, h, one("k", 2, l))
	select {
	case n := <-shared.pushed:
		if n != 2 {
			t.Errorf("pushed %d units, want 2", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no push within 10s of a 10ms sync interval")
	}
	h.Close()
}

// localWhenDown is a shared store that, down, decides every check in a
// local store with the limits' own numbers and marks it Degraded, as a
// Redis store does under the local policy (the default).
type localWhenDown struct {
	bouncer.Limiter
	local bouncer.Limiter
	down  atomic.Bool
}

func (s *localWhenDown) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	if !s.down.Load() {
		return s.Limiter.Check(ctx, r)
	}
	d, err := s.local.Check(ctx, r)
	d.Degraded = true
	return d, err
}

// TestLeaseLocalPolicyChargesTheCost: while the shared store decides by
// the local policy, a lease-mode pair that has no lease must cost the
// local limiter what it admits, not the lease it asked for (of which it
// keeps nothing): the instance admits its local limit's burst, less at
// most the one lease asked before it knew the store was down (no more
// than the demand before: 200). Before, every check asked for a lease
// sized by the demand, and the local limiter ran dry after 45 checks.
func TestLeaseLocalPolicyChargesTheCost(t *testing.T) {
	clock := storetest.NewClock(storetest.Start)
	shared := memstore.New(memstore.Options{Now: clock.Now})
	local := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { shared.Close(); local.Close() })
	s := &localWhenDown{Limiter: shared, local: local}
	h := hybrid.New(s, nil, hybrid.Options{Now: clock.Now, Manual: true, LeaseTime: time.Second})
	t.Cleanup(func() { h.Close() })
	const burst, demand = 1000, 200
	l := bouncer.Limit{Name: "b", Algorithm: bouncer.TokenBucket, Rate: burst, Period: time.Hour, Burst: burst, Mode: bouncer.Lease}
	for range demand { // so that leases are large
		clock.Advance(time.Millisecond)
		check(t, h, one("k", 1, l))
	}
	clock.Advance(2 * time.Second) // the last lease ended
	s.down.Store(true)
	admitted := 0
	for range 2 * burst {
		if d := check(t, h, one("k", 1, l)); d.Allowed {
			if !d.Degraded {
				t.Fatalf("a check without a lease, the store down: %+v, want Degraded", d)
			}
			admitted++
		}
	}
	if admitted < burst-demand || admitted > burst {
		t.Errorf("with the store down, the local limit of %d admitted %d checks of 1; want between %d and %d", burst, admitted, burst-demand, burst)
	}
}

// Close pushes what async limits admitted, the units that were waiting
// far below their limit included: another instance's view then counts
// them.
func TestClosePushesWaitingUnits(t *testing.T) {
	f := newFleet(t, 1, hybrid.Options{})
	h := f.ins[0]
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 160, Period: time.Hour, Mode: bouncer.Async}
	strict := l
	strict.Mode = bouncer.Strict
	for range 5 {
		check(t, h, one("k", 1, l))
	}
	h.Tick(context.Background())
	peek := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{strict}}}, Peek: true}
	if d := check(t, f.shared.Limiter, peek); d.Remaining != l.Rate {
		t.Fatalf("5 of 160 pending: the shared store counts %d, want them waiting", l.Rate-d.Remaining)
	}
	h.Close()
	if d := check(t, f.shared.Limiter, peek); d.Remaining != l.Rate-5 {
		t.Errorf("after Close the shared store counts %d, want the 5 waiting units", l.Rate-d.Remaining)
	}
}
