package hybrid

import (
	"context"
	"hash/maphash"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/store"
)

// Defaults of Options.
const (
	// DefaultLeaseTime is how long a lease lives at most.
	DefaultLeaseTime = time.Second
	// DefaultSyncInterval is how often async limits push their usage.
	DefaultSyncInterval = 100 * time.Millisecond
	// DefaultMaxKeys bounds the (key, limit) pairs held locally.
	DefaultMaxKeys = 1 << 20
)

// Options configure a Limiter. The zero value is usable.
type Options struct {
	// Now returns the current time; nil means time.Now. Leases and the
	// over-limit cache run on it.
	Now func() time.Time

	// LeaseTime is how long a bucket's lease lives at most (less when the
	// limit's Period is shorter; a fixed window's lease lives as long as
	// its window); 0 means DefaultLeaseTime. A bucket in lease mode admits
	// at most rate × LeaseTime more than the limit.
	LeaseTime time.Duration

	// SyncInterval is how often async limits push their usage to the
	// shared store and leases that end before the next tick are given
	// back; 0 means DefaultSyncInterval.
	SyncInterval time.Duration

	// MaxKeys bounds how many (key, limit) pairs in lease or async mode
	// the limiter holds; 0 means DefaultMaxKeys. A pair that finds no room
	// is decided as if strict.
	MaxKeys int

	// OnStoreError is the policy of async limits whose OnStoreError is
	// the default, while syncs fail: allow, deny, or local (the default:
	// each instance keeps deciding on its own view). Give it the shared
	// store's default.
	OnStoreError bouncer.StoreErrorPolicy

	// Instance names this limiter among those sharing the shared store,
	// in the shares of async pairs (see store.Sharer); "" means a random
	// name.
	Instance string

	// Region names this instance's region when instances in several
	// regions, each region with a shared store of its own, share their
	// limits; Peers are the other regions' shared stores, by region name.
	// With a Region, every limit that can be charged (store.Chargeable:
	// all but concurrency limits and shaping leaky buckets) is global, in
	// every mode: near its limit the instances of every region divide it
	// by demand (docs/regions.md); a strict or lease one is decided in the
	// region's store as without regions, each instance held to its share.
	// A fixed window's regions learn each other's counts from the shares;
	// another limit's, from charges (through Peers that are
	// store.Chargers). Each region's instances must name it alike.
	Region string
	Peers  map[string]store.Sharer

	// RegionTTL is how long an instance's shares live in the other
	// regions' stores: a region not heard from for longer is held to its
	// static share; 0 means DefaultRegionTTL.
	RegionTTL time.Duration

	// Manual starts no goroutine: the caller calls Tick every
	// SyncInterval itself (tests do, on a fake clock).
	Manual bool
}

// Limiter is the hybrid bouncer.Limiter. Its methods are safe for
// concurrent use; Close stops its goroutine and gives leases back.
type Limiter struct {
	shared, local bouncer.Limiter
	view          *memstore.Store // async limits' view of the shared counts
	ownLocal      *memstore.Store // local, if New made it
	now           func() time.Time
	leaseTime     time.Duration
	interval      time.Duration
	policy        bouncer.StoreErrorPolicy
	perShard      int
	seed          maphash.Seed
	sharer        store.Sharer // shared, if it keeps shares (async pairs share); nil if not
	instance      string       // this limiter's name in shares
	region        string
	peers         []*peer
	peerNames     []string
	regionTTL     time.Duration
	regionStats   atomic.Pointer[[]RegionStats]
	shards        [shardCount]shard
	calls         sync.Pool

	syncFailing atomic.Bool
	denialsEnd  atomic.Int64                    // no cached denial holds from then on (see cachedUntil)
	idleTicks   atomic.Uint64                   // ticks endLeases skipped, with no units parked
	lastPush    atomic.Pointer[bouncer.Request] // the last push that failed
	stats       counters

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var (
	_ store.Resetter    = (*Limiter)(nil)
	_ store.EachLimiter = (*Limiter)(nil)
)

const shardCount = 64

// New returns a hybrid limiter deciding in shared, with local for the
// pre-throttle (nil: an in-memory store of its own, which Close closes).
// Unless o.Manual, it starts a goroutine that Close stops.
func New(shared, local bouncer.Limiter, o Options) *Limiter {
	h := &Limiter{
		shared: shared, local: local,
		now:       o.Now,
		leaseTime: o.LeaseTime, interval: o.SyncInterval,
		policy: o.OnStoreError,
		seed:   maphash.MakeSeed(),

		instance: o.Instance,
	}
	h.sharer, _ = shared.(store.Sharer)
	if h.instance == "" {
		h.instance = newInstance()
	}
	h.region, h.regionTTL = o.Region, o.RegionTTL
	if h.regionTTL <= 0 {
		h.regionTTL = DefaultRegionTTL
	}
	for _, name := range slices.Sorted(maps.Keys(o.Peers)) {
		h.peers = append(h.peers, &peer{name: name, store: o.Peers[name], wake: make(chan struct{}, 1)})
		h.peerNames = append(h.peerNames, name)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.leaseTime <= 0 {
		h.leaseTime = DefaultLeaseTime
	}
	if h.interval <= 0 {
		h.interval = DefaultSyncInterval
	}
	maxKeys := o.MaxKeys
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	h.perShard = max(maxKeys/shardCount, 1)
	if h.local == nil {
		h.ownLocal = memstore.New(memstore.Options{Now: o.Now})
		h.local = h.ownLocal
	}
	h.view = memstore.New(memstore.Options{Now: o.Now})
	for i := range h.shards {
		h.shards[i].m = make(map[id]*entry)
	}
	h.calls.New = func() any { return new(call) }
	if !o.Manual {
		h.stop, h.done = make(chan struct{}), make(chan struct{})
		go h.run()
	}
	return h
}

// run ticks every interval until Close.
//
// A tick is not bounded by the interval: each call of the shared store
// has the store's own deadline, and a sync of many keys makes many calls
// one chunk after another (bounding the whole by 100 ms timed out the
// last chunks of large syncs). Close cancels a tick in progress.
func (h *Limiter) run() {
	defer close(h.done)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-h.stop
		cancel()
	}()
	var relays sync.WaitGroup
	defer relays.Wait()
	h.relays(ctx, &relays)
	// The first tick comes at a random point of the first interval:
	// instances started together (a deployment, a test) would otherwise
	// sync at the same moments, each dividing a pair on the others'
	// allowances of the interval before (docs/regions.md has the figures).
	phase := time.NewTimer(rand.N(h.interval))
	select {
	case <-h.stop:
		phase.Stop()
		return
	case <-phase.C:
	}
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.Tick(ctx)
		}
	}
}

// Close stops the limiter's goroutine, pushes what async limits admitted
// since the last sync, and gives back the units of the bucket leases it
// holds. It does not close the shared store.
func (h *Limiter) Close() error {
	h.once.Do(func() {
		if h.stop != nil {
			close(h.stop)
			<-h.done
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		h.sync(ctx, true)
		h.endLeases(ctx, true)
		h.view.Close()
		if h.ownLocal != nil {
			h.ownLocal.Close()
		}
	})
	return nil
}

// Tick pushes the async limits' usage and gives back the leases that end
// before the next tick. The limiter's goroutine calls it every
// SyncInterval; with Options.Manual the caller does.
func (h *Limiter) Tick(ctx context.Context) {
	h.sync(ctx, false)
	h.endLeases(ctx, false)
	if h.stop == nil {
		for _, p := range h.peers {
			h.send(ctx, p)
		}
	}
}

// cachedUntil notes that a denial is cached until t, so that checks
// after the last such t need not look for one.
func (h *Limiter) cachedUntil(t int64) {
	for {
		end := h.denialsEnd.Load()
		if t <= end || h.denialsEnd.CompareAndSwap(end, t) {
			return
		}
	}
}

// id names a (key, limit) pair: the limit without its Mode and
// OnStoreError, as the stores name its state.
type id struct {
	key string
	lim bouncer.Limit
}

func idOf(key string, l *bouncer.Limit) id {
	lim := *l
	lim.Mode, lim.OnStoreError = bouncer.Strict, bouncer.StoreErrorDefault
	return id{key, lim}
}

// entry is what an instance knows of a (key, limit) pair in lease or
// async mode. Times are the limiter's clock in ns since the epoch.
type entry struct {
	lim bouncer.Limit // with its Mode and policy

	// The lease: units left to spend before until; rem and resetAt are
	// the shared limit's remaining units and reset when it was granted
	// (granted: a lease was, once).
	units, until, rem, resetAt int64
	granted                    bool
	holdAsk                    int64 // the lease to ask for after a hold (see hold)

	// Demand: units asked since since, and in the span before (each span
	// a lease's life long).
	asked, prevAsked, since int64

	// The over-limit cache: checks of deniedCost or more are denied until
	// deniedUntil as denied was at deniedAt.
	deniedUntil, deniedCost, deniedAt int64
	denied                            bouncer.Decision

	// Async: units admitted since the last push, in fixed window
	// pendingWin (a fixed window's units are pushed in their window or
	// not at all: in the next they would count against it).
	pending, pendingWin int64
	dirty               bool
	// debt is units admitted that the shared store could not take yet
	// (see sync): the pair admits nothing until it has.
	debt int64
	// room is what the limit had left after the pair's last push, in
	// fixed window roomWin (see canWait); pushed: the pair was pushed.
	room, roomWin int64
	pushed        bool

	// Shares (see exchange): units asked for since wantedSince, admitted
	// or not; sharing reports that the pair shares, allow what it may
	// still admit until the next sync (in fixed window allowWin), and
	// demands the demands over an interval of the last exchange, this
	// instance's first.
	wanted, wantedSince int64
	sharing             bool
	quiet               int // syncs in a row with no demand while sharing
	allow, allowWin     int64
	demands             []float64
	static              float64 // the static shares of silent regions (see division)
	paces               map[string]*regionPace
	// An async bucket's part of the silent regions' admissions charged
	// here (see chargeSilent): since when, and the fraction of a unit
	// not charged yet.
	silentSince int64
	silentOwed  float64
	heard       map[string]bool  // the other regions whose shares it has had
	silentTo    map[string]int64 // until when a silent region was charged here
}

type shard struct {
	mu    sync.Mutex
	m     map[id]*entry
	dirty []id // async pairs with pending units
}

func (h *Limiter) shardOf(i *id) *shard {
	x := maphash.String(h.seed, i.key) ^ maphash.String(h.seed, i.lim.Name)
	return &h.shards[x%shardCount]
}

// get returns i's entry, making it if there is room (nil if not). The
// shard must be locked.
func (h *Limiter) get(sh *shard, i id, l *bouncer.Limit, now int64) *entry {
	if e := sh.m[i]; e != nil {
		return e
	}
	if len(sh.m) >= h.perShard {
		h.evict(sh, now)
		if len(sh.m) >= h.perShard {
			return nil
		}
	}
	e := &entry{lim: *l, since: now, wantedSince: now}
	sh.m[i] = e
	return e
}

// evict drops the shard's entries that hold nothing: no lease, no denial
// in force, no pending units. The shard must be locked.
func (h *Limiter) evict(sh *shard, now int64) {
	for i, e := range sh.m {
		if e.idle(now) {
			delete(sh.m, i)
		}
	}
}

func (e *entry) idle(now int64) bool {
	return (e.units == 0 || now >= e.until) && now >= e.deniedUntil && e.pending == 0 && e.debt == 0 && !e.dirty
}

// Refund gives r's units back in the shared store and the local one, and
// forgets the denials cached for its keys.
//
// An async limit's units not pushed yet are taken off what the next push
// carries, and given back to the instance's view, rather than given to the
// shared store, which has not counted them.
func (h *Limiter) Refund(ctx context.Context, r bouncer.Request) error {
	if err := store.Validate(r); err != nil {
		return err
	}
	if !hasLocal(r) {
		return h.shared.Refund(ctx, r)
	}
	h.forget(r, false)
	_ = h.local.Refund(ctx, localOnly(r))
	shared := bouncer.Request{Cost: r.Cost}
	for _, k := range r.Keys {
		var ls []bouncer.Limit
		for _, l := range k.Limits {
			if l.Mode == bouncer.Async && h.unpush(k.Key, &l, r.Cost) {
				_ = h.view.Refund(ctx, pairRequest(k.Key, l, r.Cost))
				continue
			}
			ls = append(ls, l)
		}
		if ls != nil {
			shared.Keys = append(shared.Keys, bouncer.KeyLimits{Key: k.Key, Limits: ls})
		}
	}
	if len(shared.Keys) == 0 {
		return nil
	}
	return h.shared.Refund(ctx, shared)
}

// unpush takes n units off the pending count of key under l, if it has
// that many.
func (h *Limiter) unpush(key string, l *bouncer.Limit, n int64) bool {
	i := idOf(key, l)
	sh := h.shardOf(&i)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[i]
	if e == nil || e.pending < n {
		return false
	}
	e.pending -= n
	return true
}

// GetRecord reads the shared store's record (store.Records): records
// are the shared store's, never an instance's.
func (h *Limiter) GetRecord(ctx context.Context, key string) ([]byte, bool, error) {
	return store.ForwardRecords{Next: h.shared}.GetRecord(ctx, key)
}

// PutRecord writes the shared store's record (store.Records).
func (h *Limiter) PutRecord(ctx context.Context, key string, value []byte) error {
	return store.ForwardRecords{Next: h.shared}.PutRecord(ctx, key, value)
}

// DeleteRecord removes the shared store's record (store.Records).
func (h *Limiter) DeleteRecord(ctx context.Context, key string) error {
	return store.ForwardRecords{Next: h.shared}.DeleteRecord(ctx, key)
}

// Reset forgets r's keys everywhere: the shared store, the local one,
// leases (not given back) and cached denials.
func (h *Limiter) Reset(ctx context.Context, r bouncer.Request) error {
	h.forget(r, true)
	_ = bouncer.Reset(ctx, h.local, r)
	_ = h.view.Reset(ctx, r)
	return bouncer.Reset(ctx, h.shared, r)
}

// forget drops the cached denials of r's pairs, and with all their
// entries.
func (h *Limiter) forget(r bouncer.Request, all bool) {
	for _, k := range r.Keys {
		for li := range k.Limits {
			i := idOf(k.Key, &k.Limits[li])
			sh := h.shardOf(&i)
			sh.mu.Lock()
			if e := sh.m[i]; e != nil {
				if all {
					if e.units > 0 {
						h.stats.unitsParked.Add(-e.units)
					}
					delete(sh.m, i)
				} else {
					e.deniedUntil = 0
				}
			}
			sh.mu.Unlock()
		}
	}
}

// shares reports whether l's pairs take part in the division by demand
// (see exchange): async limits, and with regions every global one (see
// globalLimit), which in strict or lease mode the region's shared store
// decides as ever while each instance's allowance holds it to its share
// of the global limit (see docs/regions.md).
func (h *Limiter) shares(l *bouncer.Limit) bool {
	return l.Mode == bouncer.Async || h.globalLimit(l)
}

// routesLocal reports whether r has a limit the limiter decides itself,
// in part or whole: a lease or async limit, or one that shares (with
// regions, a strict fixed window, whose share it keeps).
func (h *Limiter) routesLocal(r bouncer.Request) bool {
	for _, k := range r.Keys {
		for i := range k.Limits {
			if l := &k.Limits[i]; l.Mode != bouncer.Strict || h.shares(l) {
				return true
			}
		}
	}
	return false
}

// hasLocal reports whether a limit of r is in lease or async mode.
func hasLocal(r bouncer.Request) bool {
	for _, k := range r.Keys {
		for i := range k.Limits {
			if k.Limits[i].Mode != bouncer.Strict {
				return true
			}
		}
	}
	return false
}

// localOnly returns r with only its lease and async limits.
func localOnly(r bouncer.Request) bouncer.Request {
	out := bouncer.Request{Cost: r.Cost, Peek: r.Peek}
	for _, k := range r.Keys {
		var ls []bouncer.Limit
		for _, l := range k.Limits {
			if l.Mode != bouncer.Strict {
				ls = append(ls, l)
			}
		}
		if ls != nil {
			out.Keys = append(out.Keys, bouncer.KeyLimits{Key: k.Key, Limits: ls})
		}
	}
	return out
}
