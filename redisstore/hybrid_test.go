package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

// The hybrid limiter (package hybrid) in front of real Redis stores, as a
// service runs it: each instance a hybrid limiter on a store of its own
// with a client of its own, all on one Redis and one prefix. The stores
// decide at the test's fake clock (PinClock) and the limiters run on it
// too, ticked by hand, so that every figure follows from the seed whatever
// the machine's speed.

// hybridShared is one instance's shared store: a Redis store that counts
// the requests its hybrid limiter sends it (a lease or a push each,
// whether or not the store sends several in one FCALL), and the degraded
// decisions and errors it gave, which the hybrid limiter may absorb.
type hybridShared struct {
	*redisstore.Store
	requests, refunds, degraded, errs atomic.Int64
}

func (s *hybridShared) note(d bouncer.Decision, err error) {
	if d.Degraded {
		s.degraded.Add(1)
	}
	if err != nil {
		s.errs.Add(1)
	}
}

func (s *hybridShared) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	s.requests.Add(1)
	d, err := s.Store.Check(ctx, r)
	s.note(d, err)
	return d, err
}

func (s *hybridShared) CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error) {
	s.requests.Add(int64(len(rs)))
	s.Store.CheckEach(ctx, rs, ds, errs)
	for i := range rs {
		s.note(ds[i], errs[i])
	}
}

func (s *hybridShared) Refund(ctx context.Context, r bouncer.Request) error {
	s.refunds.Add(1)
	err := s.Store.Refund(ctx, r)
	s.note(bouncer.Decision{}, err)
	return err
}

var _ store.EachLimiter = (*hybridShared)(nil)

// hybridFleet is instances of one service: a hybrid limiter each, on a
// store and a client of its own, all on one prefix and one fake clock.
type hybridFleet struct {
	clock  *storetest.Clock
	shared []*hybridShared
	ins    []*hybrid.Limiter
}

// newHybridFleet makes an instance per client, its store made from so
// (with the fleet's prefix and clock), its limiter from o (with the
// fleet's clock, ticked by hand).
func newHybridFleet(t *testing.T, clients []rueidis.Client, so redisstore.Options, o hybrid.Options) *hybridFleet {
	t.Helper()
	f := &hybridFleet{clock: storetest.NewClock(storetest.Start)}
	so.Prefix = freshPrefix()
	redisstore.PinClock(&so, f.clock.Now)
	o.Now, o.Manual = f.clock.Now, true
	for _, c := range clients {
		s := &hybridShared{Store: newStore(t, c, so)}
		f.shared = append(f.shared, s)
		f.ins = append(f.ins, hybrid.New(s, nil, o))
	}
	// The instances still in the fleet close before their stores.
	t.Cleanup(func() {
		for _, h := range f.ins {
			h.Close()
		}
	})
	return f
}

// forEachHybridTopology runs f per topology with n clients, one per
// instance.
func forEachHybridTopology(t *testing.T, n int, f func(t *testing.T, clients []rueidis.Client)) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			as := addrs(t, tp.env)
			cs := make([]rueidis.Client, n)
			for i := range cs {
				cs[i] = newClient(t, as)
			}
			f(t, cs)
		})
	}
}

func (f *hybridFleet) tick(t *testing.T) {
	t.Helper()
	for _, h := range f.ins {
		h.Tick(context.Background())
	}
}

// requests is how many requests the instances sent the shared store:
// checks (leases and pushes) and refunds.
func (f *hybridFleet) requests() int64 {
	n := int64(0)
	for _, s := range f.shared {
		n += s.requests.Load() + s.refunds.Load()
	}
	return n
}

// healthy fails t if a store degraded a decision or failed: Redis is up
// and the deadline is seconds, so neither may happen, and either would
// make the figures say nothing.
func (f *hybridFleet) healthy(t *testing.T) {
	t.Helper()
	for i, s := range f.shared {
		if d, e := s.degraded.Load(), s.errs.Load(); d != 0 || e != 0 {
			t.Fatalf("instance %d's store: %d degraded decisions and %d errors with Redis up", i, d, e)
		}
	}
}

func hybridRequest(key string, cost int64, l bouncer.Limit) bouncer.Request {
	return bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: cost}
}

// hybridCheck checks r with l and fails t on an error or a degraded
// decision.
func hybridCheck(t *testing.T, l bouncer.Limiter, r bouncer.Request) bouncer.Decision {
	t.Helper()
	d, err := l.Check(context.Background(), r)
	if err != nil {
		t.Fatalf("check of %q: %v", r.Keys[0].Key, err)
	}
	if d.Degraded {
		t.Fatalf("check of %q with Redis up: degraded: %+v", r.Keys[0].Key, d)
	}
	return d
}

// hybridAdmission is one allowed check: when, which key, how many units.
type hybridAdmission struct {
	at   time.Time
	key  string
	cost int64
}

// The load's skew: the instances' shares of the checks, and the keys'.
var (
	hybridInstanceShares = []float64{0.6, 0.3, 0.1}
	hybridKeys           = []string{"hot", "warm", "cool"}
	hybridKeyShares      = []float64{0.6, 0.3, 0.1}
)

// pickShare returns i with probability shares[i].
func pickShare(rng *rand.Rand, shares []float64) int {
	i, x := 0, rng.Float64()
	for i < len(shares)-1 && x >= shares[i] {
		x -= shares[i]
		i++
	}
	return i
}

// load runs a seeded stream of checks of l through the fleet, skewed
// between instances and keys as hybridInstanceShares and hybridKeyShares
// say, each of cost 1 to 3; the clock moves 0 to step between checks, and
// every instance ticks every interval. It returns the admissions.
func (f *hybridFleet) load(t *testing.T, seed uint64, checks int, l bouncer.Limit, step, interval time.Duration) []hybridAdmission {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []hybridAdmission
	next := f.clock.Now().Add(interval)
	for range checks {
		f.clock.Advance(time.Duration(rng.Int64N(int64(step) + 1)))
		for !f.clock.Now().Before(next) {
			f.tick(t)
			next = next.Add(interval)
		}
		h := f.ins[pickShare(rng, hybridInstanceShares)]
		key := hybridKeys[pickShare(rng, hybridKeyShares)]
		cost := 1 + rng.Int64N(3)
		if hybridCheck(t, h, hybridRequest(key, cost, l)).Allowed {
			out = append(out, hybridAdmission{f.clock.Now(), key, cost})
		}
	}
	return out
}

// hybridPerWindow sums admissions per key and fixed window of period
// (aligned to the epoch, as the windows are).
func hybridPerWindow(as []hybridAdmission, period time.Duration) map[string]int64 {
	m := map[string]int64{}
	for _, a := range as {
		m[fmt.Sprintf("%s@%d", a.key, a.at.UnixNano()/int64(period))] += a.cost
	}
	return m
}

// hybridMaxInSpan is the most units admitted of key in any span of length
// d, both ends included.
func hybridMaxInSpan(as []hybridAdmission, key string, d time.Duration) int64 {
	var ks []hybridAdmission
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

// hybridFcalls is how many FCALLs c's servers ran so far, summed over its
// nodes (INFO commandstats).
func hybridFcalls(t testing.TB, c rueidis.Client) int64 {
	t.Helper()
	n := int64(0)
	for _, node := range c.Nodes() {
		n += redisUsage(t, node).fcalls
	}
	return n
}

// The options of the load tests: leases of 200ms, a sync every 100ms.
var hybridLoadOptions = hybrid.Options{LeaseTime: 200 * time.Millisecond, SyncInterval: 100 * time.Millisecond}

// hybridWithin fails t unless the admissions as of l by n instances keep
// l's mode's bound: per window of a window algorithm (any span shorter
// than a period for the sliding log), per span of several lengths for a
// bucket (its burst and what it refills in the span), at most LeaseBound
// more in lease mode (none for a window), (n − 1) × AsyncBound more in
// async mode. It returns the worst excess over the limit alone.
func hybridWithin(t *testing.T, as []hybridAdmission, l bouncer.Limit, o hybrid.Options, n int) int64 {
	t.Helper()
	extra := hybrid.LeaseBound(l, o.LeaseTime)
	if l.Mode == bouncer.Async {
		extra = int64(n-1) * hybrid.AsyncBound(l, o.SyncInterval)
	}
	worst := int64(0)
	switch l.Algorithm {
	case bouncer.FixedWindow, bouncer.SlidingWindowCounter:
		// The counter's current window counts what it admitted in it,
		// and its estimate, never below that count, stays within the
		// rate.
		for w, got := range hybridPerWindow(as, l.Period) {
			worst = max(worst, got-l.Rate)
			if got > l.Rate+extra {
				t.Errorf("window %s admitted %d, over the rate %d and %d more", w, got, l.Rate, extra)
			}
		}
	case bouncer.SlidingWindowLog:
		for _, k := range hybridKeys {
			got := hybridMaxInSpan(as, k, l.Period-1)
			worst = max(worst, got-l.Rate)
			if got > l.Rate+extra {
				t.Errorf("key %s admitted %d within a period, over the rate %d and %d more", k, got, l.Rate, extra)
			}
		}
	default:
		for _, span := range []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 2 * time.Second} {
			limit := l.Burst + (l.Rate*int64(span)+int64(l.Period)-1)/int64(l.Period)
			for _, k := range hybridKeys {
				got := hybridMaxInSpan(as, k, span)
				worst = max(worst, got-limit)
				if got > limit+extra {
					t.Errorf("key %s admitted %d in a span of %v, over the bucket's %d (burst %d and its refill) and %d more", k, got, span, limit, l.Burst, extra)
				}
			}
		}
	}
	return worst
}

// hybridModeLimits returns, for lease then async mode, a limit of rate
// per second for each algorithm that can take the mode (the buckets with
// a burst of a fifth of rate), those that keep accepts.
func hybridModeLimits(rate int64, keep func(bouncer.Limit) bool) []bouncer.Limit {
	var ls []bouncer.Limit
	for _, m := range []bouncer.Mode{bouncer.Lease, bouncer.Async} {
		for _, a := range []bouncer.Algorithm{bouncer.FixedWindow, bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket, bouncer.SlidingWindowCounter, bouncer.SlidingWindowLog} {
			l := bouncer.Limit{Name: "l", Algorithm: a, Rate: rate, Period: time.Second, Mode: m}
			if a.UsesBurst() {
				l.Burst = rate / 5
			}
			if l.Validate() == nil && keep(l) {
				ls = append(ls, l)
			}
		}
	}
	return ls
}

// hybridLoadChecks is how many checks a load test makes: about 2s of the
// fake clock, 20 sync intervals.
const hybridLoadChecks = 4000

// hybridRun runs a seeded load of checks of l through three instances
// and returns the admissions and the requests they sent the shared
// stores; it logs them (and the FCALLs the servers ran meanwhile, those
// of any other test on them included).
func hybridRun(t *testing.T, cs []rueidis.Client, l bouncer.Limit, checks int) (as []hybridAdmission, requests int64) {
	t.Helper()
	f := newHybridFleet(t, cs, redisstore.Options{}, hybridLoadOptions)
	before := hybridFcalls(t, cs[0])
	as = f.load(t, 42, checks, l, time.Millisecond, hybridLoadOptions.SyncInterval)
	f.healthy(t)
	fcalls := hybridFcalls(t, cs[0]) - before
	admitted := int64(0)
	for _, a := range as {
		admitted += a.cost
	}
	requests = f.requests()
	t.Logf("%d checks: %d admitted (%d units); %d requests to the shared stores, %d per 1000 checks; %d FCALLs on the servers meanwhile",
		checks, len(as), admitted, requests, requests*1000/int64(checks), fcalls)
	return as, requests
}

// Three instances under a seeded load far over the limits, skewed between
// them and between keys, keep each mode's bound, for every algorithm that
// can take the mode: lease mode never admits more than a fixed window's
// rate, nor more than LeaseBound over a bucket; async mode stays within
// (instances − 1) × AsyncBound of a window (the buckets are
// TestHybridAsyncBucketBound's). The windows, and async mode, send Redis
// far fewer requests than they decide checks. A bucket in lease mode does
// not there: run dry, it leases what a check costs (a quarter of what is
// left is nothing), and a denial is cached only until one unit refills.
func TestHybridLoad(t *testing.T) {
	limits := hybridModeLimits(200, func(l bouncer.Limit) bool { return l.Mode == bouncer.Lease || !l.Algorithm.UsesBurst() })
	forEachHybridTopology(t, 3, func(t *testing.T, cs []rueidis.Client) {
		for _, l := range limits {
			t.Run(l.Mode.String()+"/"+l.Algorithm.String(), func(t *testing.T) {
				as, requests := hybridRun(t, cs, l, hybridLoadChecks)
				worst := hybridWithin(t, as, l, hybridLoadOptions, len(cs))
				t.Logf("worst: %d over the limit alone", worst)
				if l.Mode == bouncer.Lease && l.Algorithm.UsesBurst() {
					if requests >= hybridLoadChecks {
						t.Errorf("%d checks made %d requests to the shared stores: more than strict", hybridLoadChecks, requests)
					}
					return
				}
				if requests*5 > hybridLoadChecks {
					t.Errorf("%d checks made %d requests to the shared stores: the hybrid limiter should make far fewer", hybridLoadChecks, requests)
				}
			})
		}
	})
}

// A bucket in async mode admits at most (instances − 1) × AsyncBound more
// than the bucket alone would, in any span, as hybrid.AsyncBound's
// comment, the package's doc and bouncer check say.
//
// It does not: each instance's view refills at the bucket's rate between
// syncs, a push the shared bucket cannot take is dropped (not carried as
// debt), and the view reconciled to empty refills again; three instances
// each over the rate admit three times the rate for as long as the load
// lasts, and the excess grows with the span.
func TestHybridAsyncBucketBound(t *testing.T) {
	limits := hybridModeLimits(100, func(l bouncer.Limit) bool { return l.Mode == bouncer.Async && l.Algorithm.UsesBurst() })
	forEachHybridTopology(t, 3, func(t *testing.T, cs []rueidis.Client) {
		for _, l := range limits {
			t.Run(l.Algorithm.String(), func(t *testing.T) {
				as, _ := hybridRun(t, cs, l, hybridLoadChecks)
				worst := hybridWithin(t, as, l, hybridLoadOptions, len(cs))
				t.Logf("worst: %d over the limit alone, bound %d", worst, int64(len(cs)-1)*hybrid.AsyncBound(l, hybridLoadOptions.SyncInterval))
			})
		}
	})
}

// Below their limits (keys under them, the hottest too), three instances
// deny nothing and send Redis at least ten times fewer requests than they
// decide checks, in either mode, for every algorithm that takes it.
func TestHybridFewerRequests(t *testing.T) {
	limits := hybridModeLimits(20000, func(bouncer.Limit) bool { return true })
	forEachHybridTopology(t, 3, func(t *testing.T, cs []rueidis.Client) {
		for _, l := range limits {
			t.Run(l.Mode.String()+"/"+l.Algorithm.String(), func(t *testing.T) {
				const checks = hybridLoadChecks / 2
				as, requests := hybridRun(t, cs, l, checks)
				if len(as) != checks {
					t.Errorf("%d of %d checks allowed below the limit, want all", len(as), checks)
				}
				if requests*10 > checks {
					t.Errorf("%d checks made %d requests to the shared stores, want at most a tenth", checks, requests)
				}
			})
		}
	})
}

// One instance alone decides every check of a seeded stream, in spells
// far over the limit, about at it and below it, as a strict store on the
// same clock does (in another prefix): in lease mode a fixed
// window, a token bucket and a GCRA, in async mode a fixed window. (An
// async bucket's usage reaches Redis up to an interval late, when it may
// have refilled to its burst meanwhile, and can deny early.)
func TestHybridOneInstanceAsStrict(t *testing.T) {
	limits := []bouncer.Limit{
		{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 30, Period: time.Second, Mode: bouncer.Lease},
		{Name: "t", Algorithm: bouncer.TokenBucket, Rate: 30, Period: time.Second, Burst: 10, Mode: bouncer.Lease},
		{Name: "g", Algorithm: bouncer.GCRA, Rate: 30, Period: time.Second, Burst: 10, Mode: bouncer.Lease},
		{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 30, Period: time.Second, Mode: bouncer.Async},
	}
	forEachHybridTopology(t, 2, func(t *testing.T, cs []rueidis.Client) {
		for _, l := range limits {
			t.Run(l.Mode.String()+"/"+l.Algorithm.String(), func(t *testing.T) {
				f := newHybridFleet(t, cs[:1], redisstore.Options{}, hybrid.Options{})
				var so redisstore.Options
				redisstore.PinClock(&so, f.clock.Now)
				strict := newStore(t, cs[1], so) // a prefix of its own
				sl := l
				sl.Mode = bouncer.Strict
				for _, seed := range []uint64{11, 12} {
					key := fmt.Sprint("k", seed)
					rng := rand.New(rand.NewPCG(seed, 2))
					next, step := f.clock.Now(), time.Duration(0)
					for i := range 1000 {
						if i%100 == 0 { // far over the limit, about at it, below it
							step = []time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond}[rng.IntN(3)]
						}
						f.clock.Advance(time.Duration(rng.Int64N(int64(step))))
						if !f.clock.Now().Before(next) {
							f.tick(t)
							next = f.clock.Now().Add(hybrid.DefaultSyncInterval)
						}
						cost := 1 + rng.Int64N(2)
						want := hybridCheck(t, strict, hybridRequest(key, cost, sl))
						got := hybridCheck(t, f.ins[0], hybridRequest(key, cost, l))
						if got.Allowed != want.Allowed {
							t.Fatalf("seed %d, check %d (cost %d at %v): hybrid allowed %v, strict %v", seed, i, cost, f.clock.Now().Sub(storetest.Start), got.Allowed, want.Allowed)
						}
					}
				}
				f.healthy(t)
				t.Logf("%d requests to the shared store for 2000 checks; stats %+v", f.requests(), f.ins[0].Stats())
			})
		}
	})
}

// An instance that dies holding leases gives nothing back: the others
// never take the window past its rate, short of what it holds, and get
// the whole rate back in the next window.
func TestHybridCrashedInstance(t *testing.T) {
	forEachHybridTopology(t, 3, func(t *testing.T, cs []rueidis.Client) {
		f := newHybridFleet(t, cs, redisstore.Options{}, hybrid.Options{})
		l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 100, Period: time.Second, Mode: bouncer.Lease}
		// Checks until the instance holds units of a lease (a lease may
		// run out on any one check).
		dead := int64(0)
		for n := 0; n < 60 || f.ins[0].Stats().UnitsParked == 0; n++ {
			f.clock.Advance(time.Millisecond)
			if hybridCheck(t, f.ins[0], hybridRequest("hot", 1, l)).Allowed {
				dead++
			}
			if n > 90 || dead != int64(n+1) {
				t.Fatalf("the hot instance admitted %d of %d and holds no lease", dead, n+1)
			}
		}
		parked := f.ins[0].Stats().UnitsParked
		// Instance 0 is gone: no Tick, no Close, ever; its store and
		// client close with the test.
		f.ins = f.ins[1:]
		admitted := int64(0)
		for i := range 400 {
			if hybridCheck(t, f.ins[i%2], hybridRequest("hot", 1, l)).Allowed {
				admitted++
			}
		}
		if want := l.Rate - dead - parked; admitted != want {
			t.Fatalf("the others admitted %d in the window after %d and a lease of %d, want the %d left of %d", admitted, dead, parked, want, l.Rate)
		}
		f.clock.Set(storetest.Start.Add(l.Period))
		admitted = 0
		for i := range 400 {
			if hybridCheck(t, f.ins[i%2], hybridRequest("hot", 1, l)).Allowed {
				admitted++
			}
		}
		if admitted != l.Rate {
			t.Fatalf("the next window admitted %d, want all %d back", admitted, l.Rate)
		}
		f.healthy(t)
	})
}
