package redisstore

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/memstore"
)

//go:embed lua/check.lua
var checkLua string

var checkScript = rueidis.NewLuaScript(checkLua)

// DefaultTimeout is the deadline of a store call when Options.Timeout is 0.
const DefaultTimeout = 5 * time.Millisecond

// DefaultBuckets is the number of buckets when Options.Buckets is 0.
const DefaultBuckets = 1 << 14

// MaxSpan bounds the time spans a limit may need in Redis (a bucket's
// Burst × interval, a window's Period): Redis's Lua computes in doubles,
// exact below 2⁵³, and the scripts keep every span below 2⁵² ns (about 52
// days). Longer limits are rejected with bouncer.ErrInvalidLimit.
const MaxSpan = time.Duration(1 << 52)

// Options configure a Store.
type Options struct {
	// Client is the Redis connection: standalone, Cluster or Sentinel,
	// as rueidis.NewClient makes it. If nil, New connects to Addrs.
	Client rueidis.Client

	// Addrs are the Redis addresses to connect to when Client is nil:
	// one standalone server, or any nodes of a Cluster. The store closes
	// the client it makes on Close.
	Addrs []string

	// Prefix starts every Redis key; "" means "bouncer". At most 64 bytes,
	// without braces.
	Prefix string

	// Buckets is how many hashes per limit share the keys, rounded up to
	// a power of two; 0 means DefaultBuckets. A hash stays in Redis's
	// compact listpack encoding while it holds at most 128 keys
	// (hash-max-listpack-entries), so set Buckets to about the number of
	// keys a limit holds at once divided by 64. Changing it forgets every
	// key's state.
	Buckets int

	// Timeout is the deadline of every call to Redis; 0 means
	// DefaultTimeout. A caller's earlier deadline wins. A check is one
	// call, except on a Cluster when its keys fall in several buckets: one
	// call per bucket, each with this deadline. A call that has to
	// reconnect does so within its deadline, so Timeout must allow for
	// connecting (and TLS) to Redis, not only for a round trip.
	Timeout time.Duration

	// OnStoreError is the policy of limits whose OnStoreError is the
	// default; its own default is bouncer.StoreErrorAllow (fail open).
	OnStoreError bouncer.StoreErrorPolicy

	// Local is the in-memory store that limits with StoreErrorLocal use
	// while Redis cannot answer. Nil means a store of the package's own,
	// which Close closes.
	Local *memstore.Store

	// Breaker configures the circuit breaker.
	Breaker BreakerOptions

	// NoBatch turns off batching: the store merges checks that arrive
	// while others are in flight into one script call (on a Cluster, one
	// per node, for checks of one limit), which decides them one after
	// another (see batch.go and slots.go).
	NoBatch bool

	// now, when set (by tests only), pins the time the scripts use
	// instead of Redis's TIME.
	now func() time.Time
}

// Store is the Redis bouncer.Limiter. Its methods are safe for concurrent
// use.
type Store struct {
	client    rueidis.Client
	ownClient bool
	cluster   bool
	prefix    string
	buckets   uint64
	timeout   time.Duration
	policy    bouncer.StoreErrorPolicy
	local     *memstore.Store
	ownLocal  bool
	breaker   *breaker
	batch     *batcher // nil with Options.NoBatch
	slots     slots    // on a Cluster: which node serves each slot
	now       func() time.Time

	limits sync.Map // bouncer.Limit → *limitInfo
	cached atomic.Int64

	calls    atomic.Uint64
	failures atomic.Uint64
	degraded atomic.Uint64
	rerouted atomic.Uint64
	lastErr  atomic.Pointer[error]

	guardUntil atomic.Int64 // since epoch: calls run guarded until then (see exec)
}

var _ bouncer.Limiter = (*Store)(nil)

// New returns a store on o.Client, or on a client it connects to o.Addrs.
func New(o Options) (*Store, error) {
	if len(o.Prefix) > 64 || containsAny(o.Prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q: at most 64 bytes, without braces", o.Prefix)
	}
	if !o.OnStoreError.Valid() {
		return nil, fmt.Errorf("redisstore: unknown OnStoreError policy %d", uint8(o.OnStoreError))
	}
	s := &Store{
		client:  o.Client,
		prefix:  o.Prefix,
		timeout: o.Timeout,
		policy:  o.OnStoreError,
		local:   o.Local,
		now:     o.now,
		breaker: newBreaker(o.Breaker, time.Now),
	}
	if s.prefix == "" {
		s.prefix = "bouncer"
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.policy == bouncer.StoreErrorDefault {
		s.policy = bouncer.StoreErrorAllow
	}
	n := o.Buckets
	if n <= 0 {
		n = DefaultBuckets
	}
	s.buckets = 1
	for s.buckets < uint64(n) {
		s.buckets <<= 1
	}
	if s.client == nil {
		if len(o.Addrs) == 0 {
			return nil, errors.New("redisstore: neither Client nor Addrs is set")
		}
		c, err := rueidis.NewClient(ClientOption(o.Addrs))
		if err != nil {
			return nil, fmt.Errorf("redisstore: connecting to %v: %w", o.Addrs, err)
		}
		s.client, s.ownClient = c, true
	}
	s.cluster = s.client.Mode() == rueidis.ClientModeCluster
	if !o.NoBatch {
		s.batch = newBatcher(s)
	}
	s.preload()
	if s.local == nil {
		s.local, s.ownLocal = memstore.New(memstore.Options{}), true
	}
	return s, nil
}

func containsAny(s, chars string) bool {
	for _, c := range chars {
		for _, d := range s {
			if c == d {
				return true
			}
		}
	}
	return false
}

// preloadTimeout bounds how long New spends loading the script.
const preloadTimeout = 2 * time.Second

// preload loads the script on every node the client knows, so that the
// first checks do not spend their deadline sending and compiling it. It is
// best effort: a node that is down now gets the script with its first
// check (EVALSHA, then EVAL on NOSCRIPT).
func (s *Store) preload() {
	ctx, cancel := context.WithTimeout(context.Background(), preloadTimeout)
	defer cancel()
	for _, n := range s.client.Nodes() {
		n.Do(ctx, n.B().ScriptLoad().Script(checkLua).Build())
	}
}

// ClientOption returns the rueidis options the store connects to addrs
// with when Options.Client is nil, and recommends for a client of one's
// own: no client-side cache (the store does not use it), and a flush delay
// of 20µs, which lets concurrent checks share a write to Redis (fewer
// system calls on both sides, for up to 20µs more latency).
func ClientOption(addrs []string) rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: addrs, DisableCache: true, MaxFlushDelay: 20 * time.Microsecond}
}

// Close stops the store's batching goroutines and closes the client and
// the local store if the store made them. (A store dropped without Close
// leaves no goroutine running for longer than 100ms of idleness.)
func (s *Store) Close() error {
	if s.batch != nil {
		s.batch.close()
	}
	if s.ownClient {
		s.client.Close()
	}
	if s.ownLocal {
		return s.local.Close()
	}
	return nil
}

// Stats are a store's counters.
type Stats struct {
	Calls        uint64 // checks and refunds sent to Redis (a batched call of n checks counts n)
	Failures     uint64 // calls that failed (error or deadline)
	Degraded     uint64 // checks decided by policy without Redis
	Rerouted     uint64 // checks of a Cluster's batch sent again on their own, their key having moved
	Breaker      string // BreakerClosed, BreakerOpen or BreakerHalfOpen
	BreakerOpens uint64 // times the breaker opened
	LastError    error  // the last failure, or nil
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	st := Stats{Calls: s.calls.Load(), Failures: s.failures.Load(), Degraded: s.degraded.Load(), Rerouted: s.rerouted.Load()}
	st.Breaker, st.BreakerOpens = s.breaker.state()
	if e := s.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	return st
}

// limitInfo is what a check sends of a limit, computed once.
type limitInfo struct {
	id     string
	args   [8]string // algorithm, rate, burst, period, interval, unit, pair, flag (see check.lua)
	packed string    // the same numbers as eight little-endian doubles, for a packed call
	log    bool
	err    error
}

// Supports reports an error wrapping bouncer.ErrInvalidLimit if the store
// cannot decide l: if l is invalid, or needs a longer span than MaxSpan
// (a window longer than about 52 days, such as a year). A service checks
// its config with it before serving.
func (s *Store) Supports(l bouncer.Limit) error { return s.info(&l).err }

func (s *Store) info(l *bouncer.Limit) *limitInfo {
	if v, ok := s.limits.Load(*l); ok {
		return v.(*limitInfo)
	}
	li := &limitInfo{}
	if err := l.Validate(); err != nil {
		li.err = err
	} else if span := supportedSpan(*l); span > MaxSpan {
		li.err = fmt.Errorf("redisstore: limit %q needs a span of %v, more than the %v the Redis store supports: %w",
			l.Name, span, MaxSpan, bouncer.ErrInvalidLimit)
	} else {
		p := algo.Prepare(*l)
		unit, pair := p.Packing()
		li.id = limitID(*l)
		li.log = l.Algorithm == bouncer.SlidingWindowLog || l.Algorithm == bouncer.Concurrency
		flag := "0"
		switch {
		case l.Shape:
			flag = "1"
		case l.ChargeDenied:
			flag = "2"
		}
		nums := [8]int64{
			int64(algorithmCode(l.Algorithm)), l.Rate, l.Burst, int64(l.Period),
			int64(l.Interval()), unit, pair, int64(flag[0] - '0'),
		}
		packed := make([]byte, 0, 8*len(nums))
		for i, v := range nums {
			li.args[i] = strconv.FormatInt(v, 10)
			// Every number is below 2^53 (MaxSpan keeps durations below
			// 2^52), so a double holds it exactly.
			packed = binary.LittleEndian.AppendUint64(packed, math.Float64bits(float64(v)))
		}
		li.packed = string(packed)
	}
	if s.cached.Load() >= maxCachedLimits {
		return li // limits are config, not input; but stay bounded regardless
	}
	v, loaded := s.limits.LoadOrStore(*l, li)
	if !loaded {
		s.cached.Add(1)
	}
	return v.(*limitInfo)
}

// maxCachedLimits bounds how many limits a store remembers the arguments
// of; beyond it they are computed per check.
const maxCachedLimits = 1 << 14

// supportedSpan is the longest time span l's algorithm computes with.
func supportedSpan(l bouncer.Limit) time.Duration {
	if l.Algorithm.UsesBurst() {
		iv := l.Interval()
		if l.Burst > int64(MaxSpan/iv) {
			return MaxSpan + 1
		}
		return time.Duration(l.Burst) * iv
	}
	return l.Period
}

func algorithmCode(a bouncer.Algorithm) int {
	switch a {
	case bouncer.TokenBucket:
		return 1
	case bouncer.GCRA:
		return 2
	case bouncer.LeakyBucket:
		return 3
	case bouncer.FixedWindow:
		return 4
	case bouncer.SlidingWindowLog:
		return 5
	case bouncer.SlidingWindowCounter:
		return 6
	case bouncer.Concurrency:
		return 7
	}
	return 0
}
