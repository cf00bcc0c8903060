package bench

import (
	"context"
	"sync"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	sethvargo "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	throttledmem "github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// spec is one limit, said in the terms every implementation understands:
// the bucket implementations refill Rate units per Period up to Burst, the
// window implementations admit WindowRate units per Window.
type spec struct {
	Rate       int64
	Period     time.Duration
	Burst      int64
	WindowRate int64
	Window     time.Duration
}

var (
	// checkSpec admits every check of BenchmarkCheck and keeps every key's
	// state alive for the whole run. It is memstore's benchLimit: buckets
	// refill 100 per second with room for 10⁸ checks, windows span ten
	// years.
	checkSpec = spec{Rate: 100, Period: time.Second, Burst: 100_000_000, WindowRate: bouncer.MaxRate, Window: bouncer.MaxPeriod}

	// holdSpec keeps the state of a key checked once for an hour (buckets)
	// or ten years (windows), so that no store of BenchmarkBytesPerKey may
	// forget a key while it is measured.
	holdSpec = spec{Rate: 1, Period: time.Hour, Burst: 1000, WindowRate: 1000, Window: bouncer.MaxPeriod}

	// refillSpec refills one unit per millisecond up to one, so that a key
	// checked less often than every millisecond finds its state refilled
	// at every check, and is refused a second check at once: the state
	// state=refilled of BenchmarkCheckRandom. Windows are a millisecond
	// long and admit one unit. A millisecond is the least interval that
	// memstore serves from its default clock, which ticks every
	// millisecond, as it serves the limits users set (100 per minute, 10
	// per second).
	refillSpec = spec{Rate: 1, Period: time.Millisecond, Burst: 1, WindowRate: 1, Window: time.Millisecond}

	// smallSpec admits three checks per key, for TestImplementations.
	smallSpec = spec{Rate: 1, Period: time.Hour, Burst: 3, WindowRate: 3, Window: bouncer.MaxPeriod}
)

// limiter is what the benchmarks drive. Implementations are safe for
// concurrent use.
type limiter interface {
	// allow checks one unit for key.
	allow(key string) (bool, error)
	// warm stores state for key that outlives the benchmark.
	warm(key string) error
	// held reports whether the implementation holds state for key.
	held(key string) bool
	// count returns how many keys the implementation holds, or -1 if it
	// does not say.
	count() int
	close()
}

// impl is one implementation under test.
type impl struct {
	name string
	new  func(spec) limiter
}

var impls = []impl{
	{"bouncer-token_bucket", newBouncer(bouncer.TokenBucket, 0)},
	{"bouncer-gcra", newBouncer(bouncer.GCRA, 0)},
	{"bouncer-fixed_window", newBouncer(bouncer.FixedWindow, 0)},
	{"bouncer-leaky_bucket", newBouncer(bouncer.LeakyBucket, 0)},
	{"bouncer-sliding_window_counter", newBouncer(bouncer.SlidingWindowCounter, 0)},
	// The same stores reading the system clock on every check
	// (memstore.Options.Resolution < 0) instead of the default clock that
	// ticks every millisecond.
	{"bouncer-token_bucket-exactclock", newBouncer(bouncer.TokenBucket, -1)},
	{"bouncer-gcra-exactclock", newBouncer(bouncer.GCRA, -1)},
	{"xrate-mutexmap", newXRateMutex},
	{"xrate-syncmap", newXRateSyncMap},
	{"sethvargo-memorystore", newSethvargo},
	{"ulule-memory", newUlule},
	{"throttled-memstore", newThrottled},
}

// bouncerLimiter builds a Request per check, as a server does.
type bouncerLimiter struct {
	s      *memstore.Store
	limits []bouncer.Limit
}

func newBouncer(a bouncer.Algorithm, resolution time.Duration) func(spec) limiter {
	return func(sp spec) limiter {
		l := bouncer.Limit{Name: "bench", Algorithm: a, Rate: sp.Rate, Period: sp.Period, Burst: sp.Burst}
		if !a.UsesBurst() {
			l = bouncer.Limit{Name: "bench", Algorithm: a, Rate: sp.WindowRate, Period: sp.Window}
		}
		return &bouncerLimiter{s: memstore.New(memstore.Options{Resolution: resolution}), limits: []bouncer.Limit{l}}
	}
}

func (b *bouncerLimiter) check(key string, cost int64) (bouncer.Decision, error) {
	return b.s.Check(context.Background(), bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: b.limits}}, Cost: cost})
}

func (b *bouncerLimiter) allow(key string) (bool, error) {
	d, err := b.check(key, 1)
	return d.Allowed, err
}

// warm charges ten seconds' worth of checkSpec's refill, as memstore's own
// benchmark does (the store forgets a key once its state is back to
// fresh), or the whole capacity of a smaller limit.
func (b *bouncerLimiter) warm(key string) error {
	return okOrErr(b.check(key, min(1000, b.limits[0].Capacity())))
}

func (b *bouncerLimiter) held(key string) bool {
	d, err := b.s.Check(context.Background(), bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: b.limits}}, Peek: true})
	return err == nil && d.Remaining < d.Capacity
}

func (b *bouncerLimiter) count() int { return b.s.Len() }
func (b *bouncerLimiter) close()     { b.s.Close() }

func okOrErr(d bouncer.Decision, err error) error {
	if err == nil && !d.Allowed {
		return errDenied
	}
	return err
}

// xrateMutex is the usual way to limit many keys with x/time/rate: one
// rate.Limiter per key in a map under a mutex. Allow reads the clock.
type xrateMutex struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	limit rate.Limit
	burst int
}

func newXRateMutex(sp spec) limiter {
	return &xrateMutex{m: make(map[string]*rate.Limiter), limit: xrateLimit(sp), burst: int(sp.Burst)}
}

func xrateLimit(sp spec) rate.Limit { return rate.Limit(float64(sp.Rate) / sp.Period.Seconds()) }

func (x *xrateMutex) allow(key string) (bool, error) {
	x.mu.Lock()
	l := x.m[key]
	if l == nil {
		l = rate.NewLimiter(x.limit, x.burst)
		x.m[key] = l
	}
	x.mu.Unlock()
	return l.Allow(), nil
}

func (x *xrateMutex) warm(key string) error { return allowErr(x.allow(key)) }

func (x *xrateMutex) held(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[key] != nil
}

func (x *xrateMutex) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.m)
}

func (x *xrateMutex) close() {}

// xrateSyncMap keeps the limiters in a sync.Map, loading before it
// allocates a limiter for LoadOrStore.
type xrateSyncMap struct {
	m     sync.Map
	limit rate.Limit
	burst int
}

func newXRateSyncMap(sp spec) limiter {
	return &xrateSyncMap{limit: xrateLimit(sp), burst: int(sp.Burst)}
}

func (x *xrateSyncMap) allow(key string) (bool, error) {
	v, ok := x.m.Load(key)
	if !ok {
		v, _ = x.m.LoadOrStore(key, rate.NewLimiter(x.limit, x.burst))
	}
	return v.(*rate.Limiter).Allow(), nil
}

func (x *xrateSyncMap) warm(key string) error { return allowErr(x.allow(key)) }

func (x *xrateSyncMap) held(key string) bool {
	_, ok := x.m.Load(key)
	return ok
}

func (x *xrateSyncMap) count() int {
	n := 0
	x.m.Range(func(any, any) bool { n++; return true })
	return n
}

func (x *xrateSyncMap) close() {}

// sethvargoLimiter counts Tokens per Interval per key.
type sethvargoLimiter struct{ s sethvargo.Store }

func newSethvargo(sp spec) limiter {
	s, err := memorystore.New(&memorystore.Config{Tokens: uint64(sp.WindowRate), Interval: sp.Window})
	if err != nil {
		panic(err)
	}
	return sethvargoLimiter{s}
}

func (l sethvargoLimiter) allow(key string) (bool, error) {
	_, _, _, ok, err := l.s.Take(context.Background(), key)
	return ok, err
}

func (l sethvargoLimiter) warm(key string) error { return allowErr(l.allow(key)) }

func (l sethvargoLimiter) held(key string) bool {
	tokens, _, err := l.s.Get(context.Background(), key)
	return err == nil && tokens != 0
}

func (l sethvargoLimiter) count() int { return -1 }
func (l sethvargoLimiter) close()     { l.s.Close(context.Background()) }

// ululeLimiter counts per fixed window, in its memory store.
type ululeLimiter struct{ l *ulule.Limiter }

func newUlule(sp spec) limiter {
	return ululeLimiter{ulule.New(ululemem.NewStore(), ulule.Rate{Period: sp.Window, Limit: sp.WindowRate})}
}

func (u ululeLimiter) allow(key string) (bool, error) {
	c, err := u.l.Get(context.Background(), key)
	return !c.Reached, err
}

func (u ululeLimiter) warm(key string) error { return allowErr(u.allow(key)) }

func (u ululeLimiter) held(key string) bool {
	c, err := u.l.Peek(context.Background(), key)
	return err == nil && c.Remaining < c.Limit
}

func (u ululeLimiter) count() int { return -1 }
func (u ululeLimiter) close()     {}

// throttledLimiter is GCRA over throttled's memstore without an LRU bound.
type throttledLimiter struct {
	st *throttledmem.MemStore
	rl *throttled.GCRARateLimiterCtx
}

func newThrottled(sp spec) limiter {
	st, err := throttledmem.New(0)
	if err != nil {
		panic(err)
	}
	quota := throttled.RateQuota{MaxRate: throttled.PerDuration(int(sp.Rate), sp.Period), MaxBurst: int(sp.Burst - 1)}
	rl, err := throttled.NewGCRARateLimiterCtx(throttled.WrapStoreWithContext(st), quota)
	if err != nil {
		panic(err)
	}
	// Its check is a read and a compare-and-swap, retried when another
	// check of the same key got in between; after 10 tries (the default)
	// it fails the check, which two goroutines on one key do now and then.
	// A user under such contention raises the bound, and so do we.
	rl.SetMaxCASAttemptsLimit(1000)
	return throttledLimiter{st, rl}
}

// allow retries a check that failed for contention, as a caller must: even
// 1000 compare-and-swap attempts run out now and then on one key shared by
// two goroutines. The retries count in its time.
func (t throttledLimiter) allow(key string) (bool, error) {
	var err error
	for range 100 {
		var limited bool
		if limited, _, err = t.rl.RateLimitCtx(context.Background(), key, 1); err == nil {
			return !limited, nil
		}
	}
	return false, err
}

func (t throttledLimiter) warm(key string) error { return allowErr(t.allow(key)) }

func (t throttledLimiter) held(key string) bool {
	v, _, err := t.st.GetWithTime(key)
	return err == nil && v != -1
}

func (t throttledLimiter) count() int { return -1 }
func (t throttledLimiter) close()     {}

func allowErr(ok bool, err error) error {
	if err == nil && !ok {
		return errDenied
	}
	return err
}
