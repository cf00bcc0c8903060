package memstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/store"
)

// DefaultMaxKeys is the MaxKeys of a store whose Options leave it 0.
const DefaultMaxKeys = 1 << 22

// Options configure a Store. The zero value is usable.
type Options struct {
	// Now returns the current time. Nil means the process's monotonic
	// clock, anchored to the wall clock once when the store is made.
	// Tests pass a fake clock's Now.
	Now func() time.Time

	// MaxKeys bounds how many (key, limit) states the store holds; 0 means
	// DefaultMaxKeys. When a new key would pass the bound, the store
	// evicts expired state if it finds some, and otherwise the sampled
	// state closest to fresh, which that key then starts over from:
	// under a flood of unique keys the store stays bounded and admits a
	// little more rather than denying every new client. Stats counts such
	// forced evictions.
	MaxKeys int

	// Shards is how many independently locked parts the store has,
	// rounded up to a power of two; 0 means 16 per CPU.
	Shards int

	// Resolution is the step of the store's clock: a goroutine of the
	// store reads the system clock every Resolution and publishes it, and
	// a check reads the published time with one atomic load. Reading the
	// system clock costs tens of nanoseconds on some machines (more than
	// the rest of a check). 0 means DefaultResolution (a millisecond);
	// values below 100µs count as 100µs. A negative Resolution makes every
	// check read the system clock. The coarse clock only serves limits
	// whose interval (Period/Rate) is at least Resolution, so that a tick
	// never brings more than one unit; faster limits read the system
	// clock. The goroutine runs only while checks come (it stops after
	// 50ms without one); Close stops it at once. Resolution is ignored when
	// Now is set.
	Resolution time.Duration

	// Persistent makes the store able to Save its state and Load it in
	// another process: it hashes keys with SipHash-1-3 under a secret of
	// its own, kept in the saved file, rather than with hash/maphash, whose
	// hashes differ in every process. It costs a few nanoseconds a check
	// (docs/benchmarks.md#persistence).
	Persistent bool
}

// Stats are a store's counters.
type Stats struct {
	Keys    int    // (key, limit) states held now
	Expired uint64 // states forgotten because they were back to fresh
	Forced  uint64 // live states evicted at MaxKeys
}

// Store is the in-memory bouncer.Limiter. Its methods are safe for
// concurrent use.
type Store struct {
	seed     maphash.Seed
	sip      *[2]uint64 // the SipHash key of a persistent store; nil otherwise
	shards   []shard
	shift    uint
	perShard int
	now      func() int64
	ticking  *ticking // nil when Now is set or Resolution is negative
	res      int64    // the ticking clock's resolution in ns; MaxInt64 without one
	shares   shares   // async instances' shares (ExchangeShares)
	records  records  // store.Records
}

var _ bouncer.Limiter = (*Store)(nil)

// New returns an empty store.
func New(o Options) *Store {
	n := o.Shards
	if n <= 0 {
		n = 16 * runtime.GOMAXPROCS(0)
	}
	n = 1 << bits.Len(uint(n-1))
	maxKeys := o.MaxKeys
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	s := &Store{
		seed:     maphash.MakeSeed(),
		shards:   make([]shard, n),
		shift:    uint(64 - bits.TrailingZeros(uint(n))),
		perShard: max((maxKeys+n-1)/n, 1),
	}
	for i := range s.shards {
		s.shards[i].max = s.perShard
	}
	if o.Persistent {
		var k [16]byte
		_, _ = rand.Read(k[:]) // never fails (crypto/rand)
		s.sip = &[2]uint64{binary.LittleEndian.Uint64(k[:]), binary.LittleEndian.Uint64(k[8:])}
	}
	s.res = math.MaxInt64
	switch {
	case o.Now != nil:
		clock := o.Now
		s.now = func() int64 { return clock().UnixNano() }
	case o.Resolution < 0:
		s.now = monotonic()
	default:
		s.now = monotonic()
		r := o.Resolution
		if r == 0 {
			r = DefaultResolution
		}
		s.ticking = newTicking(r, s.now)
		s.res = int64(s.ticking.resolution)
	}
	return s
}

// Close stops the goroutine of the store's clock, if it runs, and waits
// for it; the store keeps working, reading the system clock on every
// check. It is safe to call more than once. A store that is dropped
// without Close leaves its clock goroutine running for at most 50ms.
func (s *Store) Close() error {
	if s.ticking != nil {
		s.ticking.Close()
	}
	return nil
}

// clock returns the time for a check of t's limit: the ticking clock when
// t's interval is at least its resolution, otherwise the exact clock.
// Each table always reads the same clock, so one key's checks see times in
// order.
func (s *Store) clock(t *table) int64 {
	if t.interval >= s.res {
		return s.ticking.load()
	}
	return s.now()
}

// shardOf returns the shard that holds every limit of the key hashed to h.
func (s *Store) shardOf(h uint64) int {
	if s.shift == 64 {
		return 0
	}
	return int(h >> s.shift)
}

// Len returns how many (key, limit) states the store holds.
func (s *Store) Len() int { return s.Stats().Keys }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	var st Stats
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += sh.count
		st.Expired += sh.expired
		st.Forced += sh.forced
		sh.mu.Unlock()
	}
	return st
}

// Sweep forgets every state that is back to fresh, one shard at a time,
// and returns how many it forgot. Insertions forget idle state as tables
// need room (see docs/memstore.md); call Sweep to reclaim memory at once,
// for example after a flood of keys.
func (s *Store) Sweep() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		set := sh.tables.Load()
		var keep []*table
		if set != nil {
			for _, t := range set.list {
				n += sh.expire(t, s.clock(t), -1, 0)
				if t.one != nil {
					t.one.shrink()
				}
				// A limit no longer checked (its config changed) leaves
				// nothing behind.
				if t.len() > 0 {
					keep = append(keep, t)
				}
			}
			if len(keep) < len(set.list) {
				sh.publish(keep)
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Check decides r; see bouncer.Limiter. ctx is not consulted: the store
// never waits for anything but a shard's lock.
func (s *Store) Check(_ context.Context, r bouncer.Request) (d bouncer.Decision, err error) {
	// A valid cost is positive, or 0 for a peek: checkOne validates the
	// rest.
	if len(r.Keys) == 1 && len(r.Keys[0].Limits) == 1 && (r.Cost > 0) != r.Peek {
		err = s.checkOne(&d, r.Keys[0].Key, &r.Keys[0].Limits[0], r.Cost)
		return d, err
	}
	if err := store.Validate(r); err != nil {
		return bouncer.Decision{}, err
	}
	var hashBuf [4]uint64
	var lockBuf [4]int
	var pendBuf [4]pending
	hashes := s.hash(r.Keys, hashBuf[:0])
	locked := s.lock(hashes, lockBuf[:0])
	d = s.check(r, hashes, pendBuf[:0])
	s.unlock(locked)
	return d, nil
}

// checkOne is Check for the common request, one key and one limit: it
// fills in d, which is zero. A limit already in the shard's tables was
// validated when its table was made. For the one-word algorithms, a key
// with state is decided without the shard's lock (see words).
func (s *Store) checkOne(d *bouncer.Decision, key string, l *bouncer.Limit, cost int64) error {
	h := s.hashKey(key)
	sh := &s.shards[s.shardOf(h)]
	if t := sh.find(l); t != nil && t.one != nil {
		if t.update(h, s, cost, key, d) {
			return nil
		}
	}
	return s.checkLocked(d, sh, h, key, l, cost)
}

// checkLocked is checkOne under the shard's lock, for a new key or limit
// and for the algorithms that are not one word.
func (s *Store) checkLocked(d *bouncer.Decision, sh *shard, h uint64, key string, l *bouncer.Limit, cost int64) error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.table(l, false)
	if t == nil {
		if err := l.Validate(); err != nil {
			return err
		}
		t = sh.table(l, true)
	}
	if t.one != nil {
		// Lock-free checks may still update live state: go through update.
		if t.update(h, s, cost, key, d) {
			return nil
		}
	}
	now := s.clock(t)
	before, known := t.load(h)
	after, res := t.p.Check(before, now, cost)
	if (res.Allowed || t.limit.ChargeDenied) && cost > 0 {
		sh.save(t, h, after, now, known)
	}
	decide(d, key, t, &res)
	return nil
}

// decide fills in d with t's result res for key.
func decide(d *bouncer.Decision, key string, t *table, res *algo.Result) {
	d.Allowed = res.Allowed
	d.Capacity = t.capacity
	d.Remaining = res.Remaining
	d.ResetAfter = res.ResetAfter
	d.RetryAfter = res.RetryAfter
	d.Delay = res.Delay
	d.Key = key
	d.LimitName = t.limit.Name
}

// Refund gives r.Cost back to every limit of every key in r; see
// bouncer.Limiter.
func (s *Store) Refund(_ context.Context, r bouncer.Request) error {
	if err := store.Validate(r); err != nil {
		return err
	}
	s.eachTable(r, func(sh *shard, h uint64, t *table) {
		if t.one != nil {
			// Read, refund and write in one step: lock-free checks may
			// change the state meanwhile.
			t.refund(h, s, r.Cost)
			return
		}
		st, ok := t.load(h)
		if !ok {
			return
		}
		now := s.clock(t)
		sh.save(t, h, t.p.Refund(st, now, r.Cost), now, true)
	})
	return nil
}

var _ store.Charger = (*Store)(nil)

// Charge takes r.Cost from every limit of every key in r, past the limits
// if need be; see store.Charger. Each key's limits are charged in one
// critical section, as a check's are. ctx is not consulted.
func (s *Store) Charge(_ context.Context, r bouncer.Request) error {
	if len(r.Keys) == 1 && len(r.Keys[0].Limits) == 1 && r.Cost > 0 && !r.Peek {
		// The common request, on a key with live state, goes lock-free as
		// a check does; a limit with a table was validated when it was
		// made.
		l := &r.Keys[0].Limits[0]
		h := s.hashKey(r.Keys[0].Key)
		if t := s.shards[s.shardOf(h)].find(l); t != nil && t.one != nil && store.Chargeable(t.limit) && t.charge(h, s, r.Cost) {
			return nil
		}
	}
	if err := store.ValidateCharge(r); err != nil {
		return err
	}
	var hashBuf [4]uint64
	var lockBuf [4]int
	hashes := s.hash(r.Keys, hashBuf[:0])
	locked := s.lock(hashes, lockBuf[:0])
	defer s.unlock(locked)
	for i, k := range r.Keys {
		sh := &s.shards[s.shardOf(hashes[i])]
		for j := range k.Limits {
			t := sh.table(&k.Limits[j], true)
			if t.one != nil && t.charge(hashes[i], s, r.Cost) {
				continue // lock-free checks may update live state: go through charge
			}
			now := s.clock(t)
			before, known := t.load(hashes[i])
			sh.save(t, hashes[i], t.p.Charge(before, now, r.Cost), now, known)
		}
	}
	return nil
}

var _ store.Resetter = (*Store)(nil)

// Reset forgets the state of every limit of every key in r, as if they
// had never been checked; see store.Resetter.
func (s *Store) Reset(_ context.Context, r bouncer.Request) error {
	r.Cost, r.Peek = 0, true
	if err := store.Validate(r); err != nil {
		return err
	}
	s.eachTable(r, func(sh *shard, h uint64, t *table) {
		if t.forget(h) {
			sh.count--
		}
	})
	return nil
}

// eachTable runs f, under the shards' locks, on every key of r and the
// table of each of its limits that has one.
func (s *Store) eachTable(r bouncer.Request, f func(sh *shard, h uint64, t *table)) {
	var hashBuf [4]uint64
	var lockBuf [4]int
	hashes := s.hash(r.Keys, hashBuf[:0])
	locked := s.lock(hashes, lockBuf[:0])
	defer s.unlock(locked)
	for i, k := range r.Keys {
		sh := &s.shards[s.shardOf(hashes[i])]
		for j := range k.Limits {
			if t := sh.table(&k.Limits[j], false); t != nil {
				f(sh, hashes[i], t)
			}
		}
	}
}

// hash appends the hash of each key to hs.
func (s *Store) hash(keys []bouncer.KeyLimits, hs []uint64) []uint64 {
	for _, k := range keys {
		hs = append(hs, s.hashKey(k.Key))
	}
	return hs
}

// hashKey returns key's hash, never 0.
func (s *Store) hashKey(key string) uint64 {
	if s.sip != nil {
		return fixHash(sipHash(s.sip[0], s.sip[1], 1, 3, key))
	}
	return fixHash(maphash.String(s.seed, key))
}

// lock locks the shards of the hashed keys in increasing order, so that
// checks on overlapping keys never deadlock, and returns them.
func (s *Store) lock(hashes []uint64, idx []int) []int {
	for _, h := range hashes {
		i := s.shardOf(h)
		j := len(idx)
		for j > 0 && idx[j-1] > i {
			j--
		}
		if j > 0 && idx[j-1] == i {
			continue
		}
		idx = append(idx, 0)
		copy(idx[j+1:], idx[j:])
		idx[j] = i
	}
	for _, i := range idx {
		s.shards[i].mu.Lock()
	}
	return idx
}

func (s *Store) unlock(idx []int) {
	for _, i := range idx {
		s.shards[i].mu.Unlock()
	}
}

// shard is one independently locked part of a store: per limit, a table
// of the states of the keys that hash here.
type shard struct {
	mu      sync.Mutex
	tables  atomic.Pointer[tableSet] // read without the lock, replaced under it
	count   int                      // states held, across tables
	max     int                      // states allowed
	expired uint64
	forced  uint64
	_       [64]byte // keep shards' locks on separate cache lines
}

// tableSet is a shard's tables, never changed once published.
type tableSet struct {
	list    []*table
	byLimit map[bouncer.Limit]*table // when list is long
}

// linearTables is how many tables a shard scans before it uses a map.
const linearTables = 8

// identity is what names l's state: l without its OnStoreError policy,
// which says what to do when a shared store fails, and its Mode, which
// says how a hybrid limiter shares it, neither how to count. A limit
// whose policy or mode changes keeps its counts, as in the Redis store,
// whose keys name the same fields.
func identity(l *bouncer.Limit) bouncer.Limit {
	id := *l
	id.OnStoreError = bouncer.StoreErrorDefault
	id.Mode = bouncer.Strict
	return id
}

// find returns l's table, or nil. It takes no lock.
func (sh *shard) find(l *bouncer.Limit) *table {
	set := sh.tables.Load()
	if set == nil {
		return nil
	}
	id := identity(l)
	if set.byLimit != nil {
		return set.byLimit[id]
	}
	for _, t := range set.list {
		if t.limit == id {
			return t
		}
	}
	return nil
}

// table returns l's table, making it if create is set. It holds the lock.
func (sh *shard) table(l *bouncer.Limit, create bool) *table {
	if t := sh.find(l); t != nil || !create {
		return t
	}
	t := newTable(identity(l))
	var list []*table
	if set := sh.tables.Load(); set != nil {
		list = append(list, set.list...)
	}
	sh.publish(append(list, t))
	return t
}

// publish replaces the shard's tables with list. It holds the lock.
func (sh *shard) publish(list []*table) {
	set := &tableSet{list: list}
	if len(list) > linearTables {
		set.byLimit = make(map[bouncer.Limit]*table, len(list))
		for _, t := range list {
			set.byLimit[t.limit] = t
		}
	}
	sh.tables.Store(set)
}
