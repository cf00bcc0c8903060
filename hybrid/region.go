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
// of its own, share every fixed window (see Limiter.shares; a strict or
// lease one is decided in the region's store, its pushes peeks, each
// instance held to its allowance as an async one): each instance's shares go
// to its region's store at each exchange, as with one region, and are
// relayed to the other regions' stores, apart from the exchange, by a
// goroutine a region that sends only the latest (relay); the others'
// shares are read from the region's own store. So nothing on a request's
// path, nor a sync, waits for another region. A share relayed lives
// RegionTTL there: a region cut off keeps the others' last shares, and
// they its, until then; a region not heard from for longer holds its
// static share (see division.allowance).

// peer is another region's store, and the latest shares to relay to it.
type peer struct {
	name   string
	store  store.Sharer
	latest atomic.Pointer[relayed]
	wake   chan struct{}
}

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
		if r.Keys[0].Limits[0].Algorithm == bouncer.FixedWindow {
			b.pairs, b.mine = append(b.pairs, r), append(b.mine, mine[k])
		}
	}
	if len(b.pairs) == 0 {
		return
	}
	for _, p := range h.peers {
		p.latest.Store(&b)
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// send relays p's latest batch, if there is one; Manual limiters call it
// from Tick, the others from a goroutine a peer.
func (h *Limiter) send(ctx context.Context, p *peer) {
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
	// Used is what the region had counted in the pairs' windows, as its
	// instances last reported.
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
		if p.e.lim.Algorithm != bouncer.FixedWindow {
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
