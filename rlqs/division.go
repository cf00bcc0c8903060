package rlqs

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/bouncerhq/bouncer/internal/fairshare"
)

// A bucket's rate is divided once an epoch (one report interval, on the
// Demands' clock) among its clients, by their demands as they stood when
// the epoch began (Demands.DemandsAt): max-min fair, which comes down to
// one water level per bucket and epoch (fairshare.Level), each client's
// share being the least of its demand and the level. A report then costs a map lookup,
// whatever the number of clients. A client new in the epoch takes only
// what the division left unassigned (Demands.Claim), and one that leaves
// gives its share back, so that the shares in force never add up to more
// than the rate.
//
// A client is a peer, one connection to this server: its streams'
// demands add up to its demand, and its share is divided among its
// streams in turn, the same way, once an epoch.

// division is this server's view of one bucket's division.
type division struct {
	key   string
	fetch sync.Mutex // held while the epoch's demands are read

	refs int // the members holding it, guarded by Server.divMu

	mu      sync.Mutex         // guards what follows
	epoch   int64              // of the snapshot
	rate    float64            // divided, a second
	level   float64            // the water level
	demands map[string]float64 // the snapshot, by client
	left    map[string]bool    // clients that left the snapshot since
	free    float64            // the rate the snapshot left unassigned
	peers   map[string]*conn
}

// conn is one client of a bucket: one connection's streams. mu
// serializes its reports of the bucket (store calls included); the rest
// is guarded by the division's mu.
type conn struct {
	id string
	mu sync.Mutex

	streams    []*member
	raw        float64 // the measured streams' demands, summed
	unmeasured int     // streams not measured yet
	epoch      int64   // of share
	share      float64
	split      split
}

// member is one stream's part in a bucket.
type member struct {
	d    *division
	p    *conn
	raw  float64   // requests a second over its last interval; +Inf unmeasured
	seen time.Time // its last report, on the server's clock

	// Its part in its connection's split, if gen is the split's: its
	// demand when the split was made, or what it was granted.
	gen     uint64
	part    float64
	granted bool
}

// demand is p's demand: +Inf while a stream of it is unmeasured.
func (p *conn) demand() float64 {
	if p.unmeasured > 0 {
		return math.Inf(1)
	}
	return max(p.raw, 0)
}

// set makes m's demand raw, and its peer's with it.
func (m *member) set(raw float64) {
	p := m.p
	if math.IsInf(m.raw, 1) {
		p.unmeasured--
	} else {
		p.raw -= m.raw
	}
	m.raw = raw
	if math.IsInf(raw, 1) {
		p.unmeasured++
	} else {
		p.raw += raw
	}
}

// split is one epoch's division of a peer's share among its streams: the
// same water-filling, over the demands of the streams that reported in
// the last TTL, as they stood at the peer's first report of the epoch.
// Each stream keeps its part (member.gen, part, granted), so that a
// report costs O(1) here too.
type split struct {
	gen   uint64
	level float64
	free  float64
}

// reset makes the split of capacity among p's streams that reported
// after since; the others, open but silent, count for nothing until they
// report.
func (p *conn) reset(capacity float64, since time.Time) {
	sp := &p.split
	sp.gen++
	ds := make([]float64, 0, len(p.streams))
	for _, o := range p.streams {
		if !o.seen.After(since) {
			o.set(0)
			continue
		}
		o.gen, o.part, o.granted = sp.gen, o.raw, false
		ds = append(ds, o.raw)
	}
	level, used := fairshare.Level(capacity, ds)
	sp.level, sp.free = level, max(capacity-used, 0)
}

// shareOf is m's part of the split; a stream new in the epoch takes up to
// want of what is free.
func (sp *split) shareOf(m *member, want float64) float64 {
	switch {
	case m.gen == sp.gen && m.granted:
		return m.part
	case m.gen == sp.gen:
		return min(m.part, sp.level)
	}
	g := max(min(want, sp.free), 0)
	sp.free -= g
	m.gen, m.part, m.granted = sp.gen, g, true
	return g
}

// leave gives m's part back.
func (sp *split) leave(m *member) {
	if m.gen == sp.gen {
		sp.free += sp.shareOf(m, 0)
		m.gen = 0
	}
}

// bound is a demand as it is recorded: at most twice the share the
// client could have admitted under, or twice an equal share of rate
// among n clients, whichever is more.
func bound(demand, share, rate float64, n int) float64 {
	return max(min(demand, 2*max(share, rate/float64(max(n, 1)))), 0)
}

// join makes a stream a member of the division of bucket key, for the
// peer id.
func (s *Server) join(key, id string) *member {
	s.divMu.Lock()
	d := s.divisions[key]
	if d == nil {
		d = &division{key: key, epoch: math.MinInt64, peers: map[string]*conn{}}
		s.divisions[key] = d
	}
	d.refs++
	s.divMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.peers[id]
	if p == nil {
		p = &conn{id: id, epoch: math.MinInt64}
		d.peers[id] = p
	}
	m := &member{d: d, p: p, raw: math.Inf(1)}
	p.streams = append(p.streams, m)
	p.unmeasured++
	return m
}

// leave ends m's membership: its share goes back to its peer, and, if it
// was the peer's last stream, the peer's share to the bucket's clients
// and its demand is forgotten from the next epoch on. A demand not
// forgotten (ctx ended, the store failed) expires with its TTL.
func (s *Server) leave(ctx context.Context, m *member) {
	d, p := m.d, m.p
	p.mu.Lock()
	defer p.mu.Unlock()
	d.mu.Lock()
	p.split.leave(m)
	m.set(0)
	p.streams = slices.DeleteFunc(p.streams, func(o *member) bool { return o == m })
	gone, epoch, share := len(p.streams) == 0, d.epoch, 0.0
	if gone {
		delete(d.peers, p.id)
		if p.epoch == d.epoch {
			share = p.share
		} else if fair, ok := d.shareOf(p.id); ok {
			share = fair
		}
		// Back here in this epoch, it is a new client.
		if d.left == nil {
			d.left = map[string]bool{}
		}
		d.left[p.id] = true
	}
	d.mu.Unlock()
	s.divMu.Lock()
	if d.refs--; d.refs == 0 {
		delete(s.divisions, d.key)
	}
	s.divMu.Unlock()
	if !gone || ctx.Err() != nil {
		return
	}
	if err := s.demands.ForgetDemand(ctx, d.key, p.id, s.interval()); err != nil {
		return
	}
	if share > 0 {
		_, _ = s.demands.Claim(ctx, d.key, epoch, 0, -share)
	}
}

// share is the share, a second, of sub's bucket (a limited one) for a
// report of n requests, elapsed after its last (0 for its first): sub
// joins its bucket's division at its first.
func (st *stream) share(ctx context.Context, name string, sub *subscription, n uint64, elapsed time.Duration) float64 {
	s, b := st.s, &sub.bucket
	if sub.m == nil {
		sub.m = s.join(b.Key, st.peerID())
	}
	rate, shared := s.divide(ctx, sub.m, float64(b.Rate)/b.Period.Seconds(), n, elapsed)
	if !shared {
		s.log().Warn("rlqs: demands not shared; dividing by this server's clients", "domain", st.domain, "bucket", name)
		s.unshared.Add(1)
	}
	return rate
}

// divide is m's share of rate (a second) for a report of n requests,
// elapsed after its last (0 for its first), and whether it was divided
// with the store's demands: on a store error, rate is divided among this
// server's clients of the bucket only.
func (s *Server) divide(ctx context.Context, m *member, rate float64, n uint64, elapsed time.Duration) (float64, bool) {
	d, p := m.d, m.p
	p.mu.Lock()
	defer p.mu.Unlock()
	d.mu.Lock()
	m.seen = s.now()
	raw, old := m.measure(n, elapsed, s.interval()), m.raw
	m.set(raw)
	clients := len(d.demands)
	if _, ok := d.shareOf(p.id); !ok {
		clients++
	}
	share := 0.0
	if p.epoch != math.MinInt64 {
		share = p.share
	}
	demand := bound(p.demand(), share, rate, clients)
	m.set(old) // the split of this epoch may need the demand before
	d.mu.Unlock()
	epoch, err := s.demands.RecordDemand(ctx, d.key, p.id, demand, s.interval(), s.TTL())
	if err == nil {
		err = s.snapshot(ctx, d, epoch, rate)
	}
	if err != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		m.set(raw)
		return rate / float64(len(d.peers)*len(p.streams)), false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.epoch < d.epoch {
		share, ok := d.shareOf(p.id)
		if !ok {
			e, free, want := d.epoch, d.free, min(demand, 2*d.rate/float64(len(d.demands)+1))
			d.mu.Unlock()
			share, err = s.demands.Claim(ctx, d.key, e, free, want)
			d.mu.Lock()
			if err != nil {
				share = 0
			}
		}
		p.epoch, p.share = d.epoch, share
		p.reset(share, m.seen.Add(-s.TTL()))
	}
	m.set(raw)
	return p.split.shareOf(m, raw), true
}

// shareOf is the share of client id in the snapshot, if it is in it
// (and has not left it).
func (d *division) shareOf(id string) (float64, bool) {
	dem, ok := d.demands[id]
	return min(dem, d.level), ok && !d.left[id]
}

// measure is m's demand after a report of n requests, elapsed after its
// last: requests a second, at least one an interval (so that a client
// that sent nothing still has its next requests pass until it reports
// them). A report with no time elapsed (a client's first report of the
// bucket, sent at its first request, or two at one instant) measures
// nothing.
func (m *member) measure(n uint64, elapsed, interval time.Duration) float64 {
	if elapsed <= 0 {
		return m.raw
	}
	return max(float64(n)/elapsed.Seconds(), 1/interval.Seconds())
}

// snapshot makes d's division that of epoch, by the demands as they
// stood when it began, unless d has it (or a later one) already.
func (s *Server) snapshot(ctx context.Context, d *division, epoch int64, rate float64) error {
	d.mu.Lock()
	fresh := d.epoch >= epoch
	d.mu.Unlock()
	if fresh {
		return nil
	}
	d.fetch.Lock()
	defer d.fetch.Unlock()
	d.mu.Lock()
	fresh = d.epoch >= epoch
	d.mu.Unlock()
	if fresh {
		return nil
	}
	all, err := s.demands.DemandsAt(ctx, d.key, epoch, s.interval())
	if err != nil {
		return err
	}
	ds := make([]float64, 0, len(all))
	for _, dem := range all {
		ds = append(ds, dem)
	}
	level, used := fairshare.Level(rate, ds)
	d.mu.Lock()
	d.epoch, d.rate, d.level, d.demands, d.left, d.free = epoch, rate, level, all, nil, max(rate-used, 0)
	d.mu.Unlock()
	return nil
}
