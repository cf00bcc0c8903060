package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/memstore"
)

// DefaultTimeout is the deadline of a store call when Options.Timeout is
// 0. It is chosen from measurements (docs/redis.md, "Choosing the
// deadline"): well above the slowest reply a healthy Redis gives a store
// on a saturated machine, so that a busy instance keeps deciding in
// Redis, and short enough that a request waits little while a node that
// stopped answering is found out (a liveness probe, ProbeTimeout).
const DefaultTimeout = 50 * time.Millisecond

// DefaultBuckets is the number of buckets when Options.Buckets is 0.
const DefaultBuckets = 1 << 14

// Options configure a Store.
type Options struct {
	// URL is the Redis to connect to, in a form ParseURL reads:
	// "redis://host:6379" for one server, "redis://a:6379,b:6379" for any
	// nodes of a Cluster, "?master_set=NAME" for Sentinel, "rediss://"
	// for TLS. It is the usual way to reach Redis; set URL or Client, not
	// both. New refuses a URL ParseURL refuses, with ParseURL's error.
	//
	// The store starts whether or not Redis answers: New waits up to a
	// second for the first attempt, and then, if Redis is unreachable,
	// returns a store that decides by policy (Degraded,
	// Health().Connected false) while it keeps trying in the background,
	// and switches to Redis once it answers. The store makes its client
	// and closes it on Close.
	URL string

	// Client is how the store connects to Redis when URL cannot say it:
	// rueidis's options, for what a URL does not carry (a dial function,
	// timeouts, a Sentinel's own TLS). Start from ClientOption(addrs) or
	// ParseURL and set what else is needed. Set URL or Client, not both.
	Client rueidis.ClientOption

	// TLS, if not nil, makes the store reach Redis over TLS with these
	// files, read again when they change (see TLSFiles); Sentinels too,
	// when the URL or Client names a master set. It replaces
	// Client.TLSConfig (which ParseURL sets for rediss://, to verify
	// against the system's roots) and sets its DialCtxFn, which must be
	// nil. Nil leaves the URL's or Client's TLS as it is.
	TLS *TLSFiles

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
	// call per bucket, each with this deadline. A check whose reply has
	// not come by then decides by its limits' policy; the call counts as
	// slow, not failed (see BreakerOptions). A call that has to reconnect
	// does so within its deadline, so Timeout must allow for connecting
	// (and TLS) to Redis, not only for a round trip.
	Timeout time.Duration

	// OnStoreError is the policy of limits whose OnStoreError is the
	// default; its own default is bouncer.StoreErrorLocal: each instance
	// then enforces every limit on its own while Redis cannot answer, so
	// that N instances admit at most N times a limit.
	OnStoreError bouncer.StoreErrorPolicy

	// Local decides the limits with StoreErrorLocal while Redis cannot
	// answer: a per-instance limiter. Nil means an in-memory store of the
	// package's own (memstore, at its defaults), which Close closes.
	Local bouncer.Limiter

	// Breaker configures the circuit breakers, one per Redis node.
	Breaker BreakerOptions

	// Logger receives a line when a node's breaker opens or closes, when
	// a node turns slow or recovers, and when the store connects to
	// Redis or cannot; nil means slog.Default().
	Logger *slog.Logger

	// InFlight is how many script calls of one lane — a standalone
	// server's, or a group's on a Cluster — may be in flight at once; 0
	// means DefaultInFlight on a standalone server and
	// DefaultClusterInFlight on a Cluster, whose masters each serve the
	// lanes of several groups. A check that finds fewer in flight makes its
	// call at once from its own goroutine; one that finds them all in
	// flight waits, and goes out in the next call with the others that
	// waited (see batch.go). More calls in flight wait less; fewer make
	// larger batches, which cost Redis less per check.
	InFlight int

	// Batch bounds how many checks one script call decides; 0 means
	// DefaultBatch, and 1 turns batching off.
	Batch int

	// Groups is how many hash slots a Cluster's keys spread over, every
	// limit's alike; 0 means DefaultGroups. A script's keys must share a
	// slot, so only checks of one group can share a call: fewer groups
	// make larger batches, more spread the load over more of the
	// Cluster's slots (and so its masters). Changing it forgets every
	// key's state. A standalone server ignores it.
	Groups int

	// now, when set (by tests only), pins the time the scripts use
	// instead of Redis's TIME.
	now func() time.Time

	// tlsReloaded, when set (by tests only), is told of every reload of
	// the TLS files, with its error.
	tlsReloaded func(error)

	// conn, when set (by tests only), is the client the store uses,
	// and does not close, instead of one it connects.
	conn rueidis.Client

	// clock and ping, when set (by tests only), replace the breakers'
	// clock and liveness probe; lib, the function library.
	clock func() time.Time
	ping  func(ctx context.Context, addr string) error
	lib   *library
}

// Store is the Redis bouncer.Limiter. Its methods are safe for concurrent
// use.
type Store struct {
	prefix   string
	buckets  uint64
	timeout  time.Duration
	policy   bouncer.StoreErrorPolicy
	local    bouncer.Limiter
	ownLocal *memstore.Store // Local, if the store made it
	inFlight int
	batch    int
	tags     []string // a hash tag per group (see keys.go)
	lib      *library
	now      func() time.Time
	breakers *breakers
	log      *slog.Logger
	tls      *tlsFiles // with Options.TLS

	// Set once connected, before ready is stored; read only after ready
	// is seen true.
	client    rueidis.Client
	ownClient bool // the store made client (not a test's)
	cluster   bool
	lanes     []lane // one, or one per group on a Cluster
	slots     slots  // on a Cluster: which node serves each slot
	ready     atomic.Bool
	connected chan struct{}         // closed once ready
	connErr   atomic.Pointer[error] // while not ready: the last attempt's

	mu     sync.Mutex // guards closed and the hand-over of a connection
	closed bool
	wg     sync.WaitGroup // the lanes' goroutines

	limits sync.Map // bouncer.Limit → *limitInfo
	cached atomic.Int64

	calls    atomic.Uint64
	failures atomic.Uint64
	slow     atomic.Uint64
	degraded atomic.Uint64
	lastErr  atomic.Pointer[error]
	setupErr atomic.Pointer[error] // why the store connected but cannot decide in Redis, until a call succeeds

	guardUntil atomic.Int64 // since epoch: calls run guarded until then (see guard)
}

var _ bouncer.Limiter = (*Store)(nil)

// connectWait bounds how long New waits for a first connection.
const connectWait = time.Second

// Reconnection backoff of a store that could not connect yet: each wait
// doubles from connectRetryMin up to connectRetryMax, jittered (see
// jittered) so that instances started together with Redis down do not
// dial it together.
const (
	connectRetryMin = 50 * time.Millisecond
	connectRetryMax = 500 * time.Millisecond
)

// New returns a store on a client it connects to o.URL, or with
// o.Client (it starts even while Redis is down: see URL).
func New(o Options) (*Store, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		prefix:    o.Prefix,
		timeout:   o.Timeout,
		policy:    o.OnStoreError,
		local:     o.Local,
		inFlight:  o.InFlight,
		batch:     o.Batch,
		lib:       defaultLibrary,
		now:       o.now,
		log:       o.Logger,
		connected: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	co := o.Client
	if o.TLS != nil && o.conn == nil {
		var err error
		if s.tls, err = newTLSFiles(*o.TLS, s.log, o.tlsReloaded); err != nil {
			return nil, err
		}
		if err := s.tls.apply(&co); err != nil {
			s.tls.close()
			return nil, err
		}
	}
	clock := o.clock
	if clock == nil {
		clock = time.Now
	}
	s.breakers = newBreakers(o.Breaker, clock, s.log)
	s.breakers.ping = s.ping
	if o.ping != nil {
		s.breakers.ping = func(ctx context.Context, b *breaker) error { return o.ping(ctx, b.addr) }
	}
	s.breakers.opened = s.breakerOpened
	if s.prefix == "" {
		s.prefix = "bouncer"
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	n := o.Buckets
	if n <= 0 {
		n = DefaultBuckets
	}
	s.buckets = 1
	for s.buckets < uint64(n) {
		s.buckets <<= 1
	}
	if s.batch <= 0 {
		s.batch = DefaultBatch
	}
	groups := o.Groups
	if groups <= 0 {
		groups = DefaultGroups
	}
	s.tags = groupTags(groups)
	if o.lib != nil {
		s.lib = o.lib
	}
	if s.local == nil {
		s.ownLocal = memstore.New(memstore.Options{})
		s.local = s.ownLocal
	}
	if o.conn != nil {
		s.attach(o.conn, false)
		return s, nil
	}
	s.start(co)
	return s, nil
}

// validate reports what New refuses in o, after reading o.URL into
// o.Client.
func (o *Options) validate() error {
	if o.URL != "" {
		if len(o.Client.InitAddress) != 0 {
			return errors.New("redisstore: both URL and Client are set: set one")
		}
		co, err := ParseURL(o.URL)
		if err != nil {
			return err
		}
		o.Client = co
	}
	switch {
	case len(o.Prefix) > 64 || containsAny(o.Prefix, "{}"):
		return fmt.Errorf("redisstore: prefix %q: at most 64 bytes, without braces", o.Prefix)
	case !o.OnStoreError.Valid():
		return fmt.Errorf("redisstore: unknown OnStoreError policy %d", uint8(o.OnStoreError))
	case o.conn == nil && len(o.Client.InitAddress) == 0:
		return errors.New("redisstore: no Redis to connect to: set URL (or Client, starting from ClientOption(addrs))")
	case o.Groups > slotCount:
		return fmt.Errorf("redisstore: Groups %d: at most %d", o.Groups, slotCount)
	}
	if err := checkClientName(o.Client.ClientName); err != nil {
		return err
	}
	return checkClientName(o.Client.Sentinel.ClientName)
}

// start connects with co in the background, and waits up to connectWait
// for the first attempt.
func (s *Store) start(co rueidis.ClientOption) {
	first := make(chan struct{})
	s.breakers.wg.Add(1)
	go s.connect(co, first)
	t := time.NewTimer(connectWait)
	select {
	case <-first:
	case <-t.C:
	}
	t.Stop()
}

// connect makes the store's client, trying again with backoff until it
// connects or the store closes; it closes first after the first attempt.
func (s *Store) connect(co rueidis.ClientOption, first chan struct{}) {
	defer s.breakers.wg.Done()
	tried := func() {
		if first != nil {
			close(first)
			first = nil
		}
	}
	defer tried()
	delay := connectRetryMin
	for attempt := 1; ; attempt++ {
		c, err := rueidis.NewClient(co)
		if err == nil {
			if !s.attach(c, true) {
				c.Close()
			}
			return
		}
		refused := s.refused(err) // a Cluster's map of slots, refused to the store's user
		if refused != nil {
			err = refused
		} else {
			err = fmt.Errorf("redisstore: connecting to %v: %w%s", co.InitAddress, err, s.tls.hint(err))
		}
		s.connErr.Store(&err)
		switch {
		case attempt == 1 && refused != nil:
			s.log.Error(permissionMsg, "addrs", co.InitAddress, "err", err)
		case attempt == 1:
			s.log.Warn("redis unreachable: deciding by each limit's on_store_error policy until it answers", "addrs", co.InitAddress, "err", err)
		}
		tried()
		t := time.NewTimer(s.breakers.wait(delay))
		select {
		case <-s.breakers.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, connectRetryMax)
	}
}

// attach makes c the store's client, unless the store is closed.
func (s *Store) attach(c rueidis.Client, own bool) bool {
	s.preload(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.client, s.ownClient = c, own
	s.cluster = c.Mode() == rueidis.ClientModeCluster
	addr := "" // a Cluster's first breaker is that of its unmapped slots
	if !s.cluster {
		for a := range c.Nodes() {
			addr = a
		}
	}
	s.breakers.init(addr)
	if s.cluster {
		s.lanes = make([]lane, len(s.tags))
	} else {
		s.lanes = make([]lane, 1)
	}
	if s.inFlight <= 0 {
		s.inFlight = DefaultInFlight
		if s.cluster {
			s.inFlight = DefaultClusterInFlight
		}
	}
	if s.cluster {
		s.refreshSlots()
	}
	wasDown := s.connErr.Load() != nil
	s.connErr.Store(nil)
	s.ready.Store(true)
	close(s.connected)
	if wasDown {
		s.log.Info("redis connected: deciding in Redis", "nodes", len(c.Nodes()))
	}
	return true
}

// WaitConnected waits until the store has connected to Redis and loaded
// its function library, so that its first checks are decided in Redis,
// or until ctx is done, whose error it then returns. A store decides by
// policy until it connects: a service that waits for it a bounded time
// at start does not forget the charges of its first checks.
func (s *Store) WaitConnected(ctx context.Context) error {
	select {
	case <-s.connected:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errConnecting is the error of a call made before the store connected.
func (s *Store) errConnecting() error {
	if e := s.connErr.Load(); e != nil {
		return *e
	}
	return errors.New("redisstore: not connected to Redis yet")
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

// preloadTimeout bounds how long connecting spends loading the library.
const preloadTimeout = 2 * time.Second

// preload loads the library on every node c knows, so that the first
// calls do not spend their deadline loading it, and checks the store's
// permissions (setup). It is best effort: a node that is down now gets
// the library when a call finds it missing.
func (s *Store) preload(c rueidis.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), preloadTimeout)
	defer cancel()
	if err := s.setup(ctx, c); err != nil {
		s.setupErr.Store(&err)
	}
}

// ClientOption returns the rueidis options to connect a store to addrs
// with (Options.Client), to which credentials, TLS or Sentinel's
// master set can be added (ParseURL reads them from a URL): no
// client-side cache (the store does not use it); each call on a pooled
// connection of its own (DisableAutoPipelining): the store coalesces
// concurrent checks itself and bounds its calls in flight, so rueidis's
// pipelining would only add a hand-off to its writer and reader
// goroutines to every call (docs/redis.md measures it); and
// DefaultClientName as the name of every connection, Sentinel's too, so
// that CLIENT LIST tells which process holds it.
func ClientOption(addrs []string) rueidis.ClientOption {
	co := rueidis.ClientOption{InitAddress: addrs, DisableCache: true, DisableAutoPipelining: true, ClientName: DefaultClientName()}
	co.Sentinel.ClientName = co.ClientName
	return co
}

// Close stops the store's goroutines (batching, probes, connecting) and
// closes the client and the local store if the store made them. (A store
// dropped without Close leaves no batching goroutine running for longer
// than 100ms of idleness.)
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.breakers.close()
	s.wg.Wait() // the lanes' goroutines, which end with their queues
	if s.ownClient {
		s.client.Close()
	}
	if s.tls != nil {
		s.tls.close()
	}
	if s.ownLocal != nil {
		return s.ownLocal.Close()
	}
	return nil
}

// limitInfo is what a call sends of a limit, computed once.
type limitInfo struct {
	id   string // in its Redis keys (limitID)
	def  string // its definition (lua/algo.lua's params)
	tick int64  // its unit of time in ns (algo.Params.Tick): the reply's durations count it
	log  bool   // its state is a log, in a key of its own
	err  error

	// A calendar limit's windows, and its definition with the windows
	// around the last call's instant (see calDef).
	cal    *algo.Params
	calNow atomic.Pointer[calDef]
}

// calDef is a calendar limit's definition for the calls whose clock is
// in [start, end): the window before, the window, and the one after.
type calDef struct {
	start, end int64
	def        string
}

// calDef returns a calendar limit's definition for a call at now: def,
// then the starts of the window before now's, of now's and of the two
// after, as Unix nanoseconds (lua/algo.lua's params). Go computes them
// because Lua has no time zone database; the script picks the window
// that holds Redis's clock, which may differ from this one by up to a
// window, and refuses a clock farther off.
func (li *limitInfo) calDef(now int64) string {
	if c := li.calNow.Load(); c != nil && c.start <= now && now < c.end {
		return c.def
	}
	start, end := li.cal.Window(now)
	before, _ := li.cal.Window(start - 1)
	_, after := li.cal.Window(end)
	c := &calDef{start: start, end: end, def: fmt.Sprintf("%s %d %d %d %d", li.def, before, start, end, after)}
	li.calNow.Store(c)
	return c.def
}

func (s *Store) info(l *bouncer.Limit) *limitInfo {
	if v, ok := s.limits.Load(*l); ok {
		return v.(*limitInfo)
	}
	li := &limitInfo{}
	if err := l.Validate(); err != nil {
		li.err = err
	} else {
		li.id = limitID(*l)
		li.log = l.Algorithm == bouncer.SlidingWindowLog || l.Algorithm == bouncer.Concurrency
		li.def, li.tick = limitDef(*l)
		if !l.Calendar.IsZero() {
			p := algo.Prepare(*l)
			li.cal = &p
		}
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

// limitDef returns l's definition for the library (lua/algo.lua's
// params), and its tick: every duration of it counts ticks.
func limitDef(l bouncer.Limit) (string, int64) {
	p := algo.Prepare(l)
	tick := p.Tick()
	unit, pair := p.Packing()
	period, interval := p.Period(), p.Interval()
	flag := 0
	switch {
	case l.Shape:
		flag = 1
	case l.ChargeDenied:
		flag = 2
	}
	return fmt.Sprintf("%d %d %d %d %d %d %d %d %d", algorithmCode(l.Algorithm), l.Rate, l.Burst,
		tick, period/tick, interval/tick, unit/tick, pair/tick, flag), tick
}

// maxCachedLimits bounds how many limits a store remembers the
// definitions of; beyond it they are computed per check.
const maxCachedLimits = 1 << 14

// algorithmCode is an algorithm's code in the library (lua/algo.lua's
// TOKEN_BUCKET and the others).
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
