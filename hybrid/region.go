package hybrid

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// DefaultRegionTTL is how long an instance's shares live in the other
// regions' stores when Options.RegionTTL is 0.
const DefaultRegionTTL = 10 * time.Second

// Regions. Instances in several regions, each region with a shared store
// of its own, share every limit that can be charged (see globalLimit; a
// strict or lease one is decided in the region's store, each instance
// held to its allowance as an async one): each instance's shares go
// to its region's store at each exchange, as with one region, and are
// relayed to the other regions' stores, apart from the exchange, by a
// goroutine a region that sends only the latest (relay); the others'
// shares are read from the region's own store. So nothing on a request's
// path, nor a sync, waits for another region. A share relayed lives
// RegionTTL there: a region cut off keeps the others' last shares, and
// they its, until then; a region not heard from for longer holds its
// static share (see division.allowance).

// A fixed window's regions learn each other's counts from the shares
// (store.Share.Used). The other limits are global by charges: the units
// an instance admits of such a pair are charged, at its sync, to the
// pair's ledger (ledgerOf) in every other region's store too (owe; send
// charges them through store.Charger, apart from the exchange as shares
// are), so that each region's ledger counts every region's admissions, a
// link's delay late; the shares are then divided by demand across
// regions as a fixed window's are, what the ledger has left being the
// pool.
// Charges a peer could not take are charged again at the next send, at
// most an interval's worth of the limit's rate: a region cut off for
// longer is held by its share, not by the charges it missed.

// A region whose shares of a pair global by charges have not come for
// silentIntervals sync intervals (a link cut, or its instances gone) is
// charged here for what it admits meanwhile, as its charges no longer
// come: at the rate its instances' last allowances give, from when its
// next share was due (the intervals it took to find it silent are
// charged at once), or, past the regions' TTL, its static share of the
// limit's rate; each instance of this region charges its part (see
// chargeSilent).
const silentIntervals = 5

// chargeSilent charges this region's store, for pair p, with its part of
// what the silent other regions admitted since its last exchange (see
// silentIntervals). others are the others' shares at the exchange.
func (h *Limiter) chargeSilent(ctx context.Context, p *push, others []store.Share, now int64) {
	l := &p.e.lim
	if !h.chargedAcross(l) {
		return
	}
	newest, allowed := map[string]int64{}, map[string]int64{}
	own := 1 // this region's instances
	for _, o := range others {
		if o.Region == h.region {
			own++
			continue
		}
		newest[o.Region] = max(newest[o.Region], o.At)
		allowed[o.Region] += o.Allowance
	}
	silent := int64(silentIntervals) * int64(h.interval)
	p.sh.mu.Lock()
	since := p.e.silentSince
	p.e.silentSince = now
	owed := 0.0 // units the silent regions admitted since the last exchange
	for _, r := range h.peerNames {
		switch at, live := newest[r]; {
		case live:
			if p.e.heard == nil {
				p.e.heard, p.e.silentTo = map[string]bool{}, map[string]int64{}
			}
			p.e.heard[r] = true
			if now-at > silent {
				// From when its next share was due, the time it took to
				// find it silent included, or from what was charged.
				from := max(p.e.silentTo[r], at+int64(h.interval))
				owed += float64(allowed[r]) / float64(h.interval) * float64(max(now-from, 0))
				p.e.silentTo[r] = now
			}
		case p.e.heard[r] && since > 0:
			// Heard once, its shares since expired: its static share.
			owed += float64(l.Rate) / float64(l.Period) / float64(len(h.peerNames)+1) * float64(now-since)
		}
	}
	if owed == 0 {
		p.e.silentOwed = 0
		p.sh.mu.Unlock()
		return
	}
	p.e.silentOwed += owed / float64(own)
	n := int64(p.e.silentOwed)
	p.e.silentOwed -= float64(n)
	p.sh.mu.Unlock()
	if c, ok := h.shared.(store.Charger); ok && n > 0 {
		_ = c.Charge(ctx, pairRequest(p.id.key, ledgerOf(p.e.lim), n))
	}
}

// chargedAcross reports whether l's pairs are global by charges: with
// regions, a limit that can be charged (store.Chargeable) and is not a
// fixed window, in any mode.
func (h *Limiter) chargedAcross(l *bouncer.Limit) bool {
	return h.region != "" && l.Algorithm != bouncer.FixedWindow && store.Chargeable(*l)
}

// globalLimit reports whether, with regions, l is one limit across
// them: every fixed window (by the counts the shares report), and every
// other limit that can be charged (by the charges relayed, see owe). A
// concurrency limit or a shaping leaky bucket is each region's own.
func (h *Limiter) globalLimit(l *bouncer.Limit) bool {
	return h.region != "" && store.Chargeable(*l)
}

// A strict or lease bucket of regions is decided by its region's store
// on the region's own state, exact inside the region as without regions,
// each instance also held to its share of the global limit: the regions
// divide what a second state, its ledger, has left. The ledger is the
// same limit under another name (ledgerOf) in every region's store,
// charged with every region's admissions, the region's own at each sync
// (its push) and the others' by their relays. The strict state never
// takes the others' charges: what another region admitted never makes a
// region's own checks wait (an async bucket's state is its ledger: its
// admissions are decided by the division alone).

// ledgerSuffix ends the name of a strict or lease bucket's ledger.
const ledgerSuffix = " (regions' ledger)"

// hasLedger reports whether l's pairs, with regions, count in a ledger
// beside their state: a strict or lease limit that is not a fixed
// window (see above).
func hasLedger(l *bouncer.Limit) bool {
	return l.Mode != bouncer.Async && l.Algorithm != bouncer.FixedWindow
}

// ledgerOf is the limit the charges of l's pairs go to: its ledger if it
// has one (see hasLedger), else l itself.
func ledgerOf(l bouncer.Limit) bouncer.Limit {
	if hasLedger(&l) {
		l.Name += ledgerSuffix
	}
	return l
}

// peer is another region's store, and the latest shares to relay to it.
type peer struct {
	name   string
	store  store.Sharer
	latest atomic.Pointer[relayed]
	wake   chan struct{}

	mu   sync.Mutex
	owed map[id]int64 // units admitted here, by ledger, not charged there yet (see owe)
}

// owe records that the instance admitted n units of key under l, a
// limit global by charges (see chargedAcross), for the other regions'
// stores to be charged with, on its ledger (see send).
func (h *Limiter) owe(key string, l *bouncer.Limit, n int64) {
	if n <= 0 || len(h.peers) == 0 || !h.chargedAcross(l) {
		return
	}
	led := ledgerOf(*l)
	i := idOf(key, &led)
	for _, p := range h.peers {
		p.mu.Lock()
		if p.owed == nil {
			p.owed = map[id]int64{}
		}
		// A peer cut off keeps at most as many keys owed as the limiter
		// keeps pairs (Options.MaxKeys); the charges of others are lost.
		if _, ok := p.owed[i]; ok || len(p.owed) < h.perShard*shardCount {
			p.owed[i] += n
		}
		p.mu.Unlock()
	}
}

// charge charges p's store with what is owed to it; what it could not
// take is owed again, at most an interval's worth of each limit's rate.
func (h *Limiter) charge(ctx context.Context, p *peer) {
	p.mu.Lock()
	owed := p.owed
	p.owed = nil
	p.mu.Unlock()
	c, ok := p.store.(store.Charger)
	if !ok || len(owed) == 0 {
		return
	}
	// At most chargesInFlight at once, so that the store batches them.
	var wg sync.WaitGroup
	sem := make(chan struct{}, chargesInFlight)
	for i, n := range owed {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if c.Charge(ctx, pairRequest(i.key, i.lim, n)) == nil {
				return
			}
			keep := min(n, max(i.lim.Rate*int64(h.interval)/int64(i.lim.Period), 1))
			p.mu.Lock()
			if p.owed == nil {
				p.owed = map[id]int64{}
			}
			p.owed[i] = min(p.owed[i]+keep, keep)
			p.mu.Unlock()
		})
	}
	wg.Wait()
}

// chargesInFlight is how many charges a peer's relay makes at once.
const chargesInFlight = 64

// relayed is a batch of this instance's shares of global pairs.
type relayed struct {
	pairs []bouncer.Request
	mine  []store.Share
}

// relay hands the shares of the global pairs among pairs to every peer's
// relay, which sends the latest it has.
func (h *Limiter) relay(pairs []bouncer.Request, mine []store.Share) {
	if len(h.peers) == 0 {
		return
	}
	var b relayed
	for k, r := range pairs {
		if h.globalLimit(&r.Keys[0].Limits[0]) {
			b.pairs, b.mine = append(b.pairs, r), append(b.mine, mine[k])
		}
	}
	if len(b.pairs) > 0 {
		for _, p := range h.peers {
			p.latest.Store(&b)
		}
	}
	h.wakeRelays()
}

// wakeRelays wakes every peer's relay, to send what it has: the latest
// shares, and the charges owed (see owe).
func (h *Limiter) wakeRelays() {
	for _, p := range h.peers {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// send relays p's latest batch, if there is one; Manual limiters call it
// from Tick, the others from a goroutine a peer.
func (h *Limiter) send(ctx context.Context, p *peer) {
	h.charge(ctx, p)
	b := p.latest.Swap(nil)
	if b == nil {
		return
	}
	if _, err := p.store.ExchangeShares(ctx, h.regionTTL, b.pairs, b.mine); err != nil {
		p.latest.CompareAndSwap(nil, b) // sent again with the next, unless newer came
	}
}

// relays runs a peer's relay until ctx ends.
func (h *Limiter) relays(ctx context.Context, wg *sync.WaitGroup) {
	for _, p := range h.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-p.wake:
					h.send(ctx, p)
				}
			}
		}()
	}
}

// RegionStats is what an instance knows of a region at its last
// exchange, over the global pairs it exchanged.
type RegionStats struct {
	Region string
	// Used is what the region had counted in the pairs' fixed windows,
	// as its instances last reported (buckets report none).
	Used int64
	// Allowance is what its instances may still admit until their next
	// syncs, as they last reported.
	Allowance int64
	// Age is how old the newest share heard from the region is (0 for
	// this instance's own region).
	Age time.Duration
}

// noteRegions keeps what the exchange told of each region, for Regions.
func (h *Limiter) noteRegions(now int64, at []*push, others [][]store.Share, mine []store.Share) {
	if h.region == "" {
		return
	}
	byRegion := map[string]*RegionStats{}
	newest := map[string]int64{}
	stat := func(name string) *RegionStats {
		s := byRegion[name]
		if s == nil {
			s = &RegionStats{Region: name}
			byRegion[name] = s
		}
		return s
	}
	for k, p := range at {
		if !h.globalLimit(&p.e.lim) {
			continue
		}
		win := window(&p.e.lim, now)
		own := stat(h.region)
		own.Used += mine[k].Used
		own.Allowance += mine[k].Allowance
		usedBy := map[string]int64{}
		for _, o := range others[k] {
			s := stat(o.Region)
			if o.Window == win {
				usedBy[o.Region] = max(usedBy[o.Region], o.Used)
				s.Allowance += o.Allowance
			}
			newest[o.Region] = max(newest[o.Region], o.At)
		}
		for r, u := range usedBy {
			if r != h.region {
				stat(r).Used += u
			}
		}
	}
	var out []RegionStats
	for _, name := range append([]string{h.region}, h.peerNames...) {
		s := stat(name)
		if name != h.region && newest[name] > 0 {
			s.Age = time.Duration(max(now-newest[name], 0))
		} else if name != h.region {
			s.Age = -1
		}
		out = append(out, *s)
	}
	h.regionStats.Store(&out)
}

// Regions returns what the limiter knew of each region at its last
// exchange of global pairs, its own first; nil without regions. An Age
// of -1 means no share of the region has been heard.
func (h *Limiter) Regions() []RegionStats {
	if s := h.regionStats.Load(); s != nil {
		return slices.Clone(*s)
	}
	return nil
}
