package hybrid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/fairshare"
	"github.com/bouncerhq/bouncer/store"
)

// Shares. With a shared store that keeps them (store.Sharer), an async
// pair near its limit is divided among the instances deciding it by
// their demand: at each sync every instance records its demand, and
// then its allowance (what it may admit until its next sync), and reads
// the others'; it then admits at most its max-min fair share of what is left
// (the window's remaining units, or the bucket's tokens and what it
// refills until the next sync), and never more than what the others'
// allowances leave of it. What the division leaves over, when every
// demand is met, is split half evenly, half by demand. So the allowances in force add up to
// at most what is left, and the instances together admit at most the
// limit but for rounding (a unit an instance).
//
// A pair shares from its first push near its limit (its pending units at
// least a sixteenth of what it had left, as canWait has it) while it is
// asked for; a pair far below its limit, or one seen for the first time,
// is held by its view alone, as without shares. A fixed window's
// allowance ends with its window: in the next, each instance takes its
// share of the whole rate by the demands it last knew, until it has
// exchanged in that window.

// shareTTLIntervals is how many sync intervals a share lives in the
// shared store: a pair that shares exchanges every interval, so a share
// outlives one or two late syncs, and the share of an instance that
// stopped lapses soon after.
const shareTTLIntervals = 3

// newInstance names an instance uniquely among those sharing a store.
func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ask records a check of a pair that shares (an async pair, or with
// regions a strict or lease fixed window) for cost: its demand, and, if
// the pair shares and syncs work, its allowance, which the check takes
// cost of (given back by undo). It returns false if the allowance is too
// small: the check is denied. The shard must be locked.
func (e *entry) ask(l *bouncer.Limit, cost, now int64, failing bool) bool {
	e.wanted += cost
	if !e.sharing || failing {
		return true
	}
	if w := window(l, now); l.Algorithm == bouncer.FixedWindow && w != e.allowWin {
		e.allow, e.allowWin = e.rollover(l), w
	}
	if cost > e.allow {
		return false
	}
	e.allow -= cost
	return true
}

// rollover is a fixed window's allowance in a window it has not
// exchanged in yet: its share of the whole rate (less the static shares
// of regions it does not hear from) by the last demands it knew.
func (e *entry) rollover(l *bouncer.Limit) int64 {
	return ceilUnits(divide(float64(l.Rate)-e.static, e.demands)[0])
}

// divide is the max-min fair division of pool among demands. What it
// leaves over when every demand is met is split half evenly, half in
// proportion to the demands: the busier instances, whose demand varies
// the most in units, get more room, and a quiet one keeps some
// (docs/hybrid.md has the splits measured).
func divide(pool float64, demands []float64) []float64 {
	shares := fairshare.Shares(pool, demands)
	left, asked := pool, 0.0
	for k, s := range shares {
		left -= s
		asked += max(demands[k], 0)
	}
	if left <= 0 {
		return shares
	}
	n := float64(len(shares))
	for k := range shares {
		if asked > 0 {
			shares[k] += left * (max(demands[k], 0) + asked/n) / (2 * asked)
		} else {
			shares[k] += left / n
		}
	}
	return shares
}

func ceilUnits(x float64) int64 {
	return int64(min(math.Ceil(x), float64(bouncer.MaxRate)))
}

// division is what a pair's allowance is worked out from at an
// exchange.
type division struct {
	l        *bouncer.Limit
	pool     float64 // what the push left (see Limiter.pool)
	mine     float64 // this instance's demand, units a second
	others   []store.Share
	win      int64 // the fixed window now
	interval time.Duration
	joining  bool
	region   string             // this instance's region; "" for one region
	peers    []string           // the other regions
	paces    map[string]float64 // the other regions' admissions a ns (see entry.pace)
	now      int64
}

// allowance is what this instance may admit of the pool until its next
// sync: its share of the pool by its demand and the others' over one
// interval, never more than the others' allowances in force leave. An
// other whose share is of an earlier fixed window holds its share of
// the whole rate (see rollover). An instance joining the division takes
// its share all the same: the others, which see its demand from now on,
// make room at their next syncs; the limit may be passed by its share
// meanwhile, as at a cold start.
//
// With regions, a fixed window is global: the pool is also less what the
// other regions have counted in this window (the most any of their
// instances reported), their instances' allowances are held as the
// region's own are, and a region not heard from within the regions' TTL
// holds its static share: the rate split evenly among the regions. It
// returns the demands (this instance's first) and the static shares
// held, for rollover.
func (d *division) allowance() (a int64, demands []float64, static float64) {
	global := d.region != "" && store.Chargeable(*d.l)
	var others []store.Share
	used, heard := map[string]int64{}, map[string]bool{}
	for _, o := range d.others {
		if o.Region != d.region {
			if !global {
				continue
			}
			heard[o.Region] = true
			if o.Window == d.win {
				used[o.Region] = max(used[o.Region], o.Used)
			}
		}
		others = append(others, o)
	}
	pool := d.pool
	for _, u := range used {
		pool -= float64(u)
	}
	if global {
		// A fixed window's static share is of its rate; a bucket's (or a
		// sliding window's), of what it has now.
		whole := float64(d.l.Rate)
		if d.l.Algorithm != bouncer.FixedWindow {
			whole = d.pool
		}
		for _, p := range d.peers {
			if !heard[p] {
				static += whole / float64(len(d.peers)+1)
			}
		}
	}
	perInterval := d.interval.Seconds()
	demands = make([]float64, 1+len(others))
	demands[0] = d.mine * perInterval
	for k, o := range others {
		demands[k+1] = o.Demand * perInterval
	}
	shares := divide(max(pool-static, 0), demands)
	var fresh []float64
	held := static
	remote, newest := map[string]float64{}, map[string]int64{}
	for k, o := range others {
		switch {
		case d.l.Algorithm == bouncer.FixedWindow && o.Window != d.win:
			if fresh == nil {
				fresh = divide(float64(d.l.Rate)-static, demands)
			}
			held += float64(ceilUnits(fresh[k+1]))
		case o.Region != d.region && d.l.Algorithm != bouncer.FixedWindow:
			// A pair global by charges (see chargedAcross): what another
			// region admitted comes into the pool as charges, what it
			// will admit is its share of the same pool.
		case o.Region != d.region:
			remote[o.Region] += float64(o.Allowance)
			newest[o.Region] = max(newest[o.Region], o.At)
		default:
			held += float64(o.Allowance)
		}
	}
	// Another region's shares are as old as the link: since them its
	// instances may have renewed their allowances. It holds what they
	// reported, or what it admits at its pace from then until this
	// allowance ends, if more.
	for r, allowed := range remote {
		age := float64(max(d.now-newest[r], 0) + int64(d.interval))
		held += max(allowed, d.paces[r]*age)
	}
	a = ceilUnits(shares[0])
	if !d.joining {
		a = min(a, int64(max(pool-held, 0)))
	}
	return max(a, 0), demands, static
}

// regionPace is what an instance has seen of another region's count of a
// fixed window: its newest report, and the pace it grows at.
type regionPace struct {
	used, at, win int64
	rate          float64 // units a ns
}

// pace updates e's paces of the other regions from their shares, and
// returns them: each region's count, as its newest share reports it,
// over the time between two reports, in one window, halved with the
// pace before at each new report. The shard must be locked.
func (e *entry) pace(region string, others []store.Share, win int64) map[string]float64 {
	if region == "" || e.lim.Algorithm != bouncer.FixedWindow {
		return nil
	}
	newest := map[string]store.Share{}
	for _, o := range others {
		if n, ok := newest[o.Region]; o.Region != region && o.Window == win && (!ok || o.At > n.At || o.At == n.At && o.Used > n.Used) {
			newest[o.Region] = o
		}
	}
	if e.paces == nil {
		e.paces = map[string]*regionPace{}
	}
	out := map[string]float64{}
	for r, o := range newest {
		p := e.paces[r]
		switch {
		case p == nil:
			p = &regionPace{}
			e.paces[r] = p
		case p.win == o.Window && o.At > p.at && o.Used >= p.used:
			p.rate = (p.rate + float64(o.Used-p.used)/float64(o.At-p.at)) / 2
		}
		p.used, p.at, p.win = o.Used, o.At, o.Window
		out[r] = p.rate
	}
	for r, p := range e.paces {
		if _, ok := out[r]; !ok {
			out[r] = p.rate
		}
	}
	return out
}

// record records this instance's new allowances: for ttl, but those of
// the pairs spent (the indexes of spent, in order) for spentTTL.
func (h *Limiter) record(ctx context.Context, sharer store.Sharer, ttl, spentTTL time.Duration, pairs []bouncer.Request, mine []store.Share, spent []int) {
	if len(spent) == 0 {
		_, _ = sharer.ExchangeShares(ctx, ttl, pairs, mine)
		return
	}
	var live, gone []bouncer.Request
	var liveMine, goneMine []store.Share
	for k := range pairs {
		if len(spent) > 0 && spent[0] == k {
			gone, goneMine, spent = append(gone, pairs[k]), append(goneMine, mine[k]), spent[1:]
			continue
		}
		live, liveMine = append(live, pairs[k]), append(liveMine, mine[k])
	}
	if len(live) > 0 {
		_, _ = sharer.ExchangeShares(ctx, ttl, live, liveMine)
	}
	_, _ = sharer.ExchangeShares(ctx, spentTTL, gone, goneMine)
}

// pool is what pair p can admit from its push until the next sync: a
// window's units left, a bucket's tokens and what it refills meanwhile.
func (h *Limiter) pool(l *bouncer.Limit, remaining int64) float64 {
	if !l.Algorithm.UsesBurst() {
		return float64(remaining)
	}
	return float64(remaining) + float64(l.Rate)*float64(h.interval)/float64(l.Period)
}

// used is what a fixed window of l has counted when rem are left (0 for
// the other algorithms).
func used(l *bouncer.Limit, rem int64) int64 {
	if l.Algorithm != bouncer.FixedWindow {
		return 0
	}
	return max(l.Rate-max(rem, 0), 0)
}

// shareDemand takes the units e was asked for since the last exchange,
// as units a second.
func (e *entry) shareDemand(now int64, interval time.Duration) float64 {
	span := now - e.wantedSince
	if span <= 0 {
		span = int64(interval)
	}
	d := float64(e.wanted) * float64(time.Second) / float64(span)
	e.wanted, e.wantedSince = 0, now
	return d
}

// mine is this instance's shares of the pairs among ps that share, for
// their sync: each with its demand since the last exchange, and what it
// may still admit of the allowance in force; the exchange after the
// sync records the new allowance (see exchange).
func (h *Limiter) mine(ps []push) []store.SyncShare {
	if h.sharer == nil {
		return nil
	}
	var mine []store.SyncShare
	now := h.now().UnixNano()
	for k := range ps {
		p := &ps[k]
		if !p.share {
			continue
		}
		p.sh.mu.Lock()
		e := p.e
		s := store.Share{Instance: h.instance, Demand: e.shareDemand(now, h.interval), Allowance: max(e.allow, 0), Window: e.allowWin,
			Region: h.region, At: now}
		if e.roomWin == window(&e.lim, now) {
			s.Used = used(&e.lim, e.room)
		}
		p.joining = !e.sharing
		p.sh.mu.Unlock()
		mine = append(mine, store.SyncShare{Pair: k, Share: s})
	}
	return mine
}

// exchange sets the allowance of each pair of ps that shared in the sync
// (mine) from what its push left and the others' shares (others), then
// records the new allowances. A sync records shares twice so: with the
// demand (and the allowance in force) in the push's call, so that the
// others see the demand at once, then with the new allowance, which the
// others hold until this instance's next sync (docs/hybrid.md has the
// designs with one call a sync that were tried, and what they admitted).
func (h *Limiter) exchange(ctx context.Context, ps []push, mine []store.SyncShare, others [][]store.Share) {
	var pairs []bouncer.Request
	var shares []store.Share
	var at []*push
	var spent []int
	var spentTTL time.Duration
	now := h.now().UnixNano()
	ttl := shareTTLIntervals * h.interval
	for j, m := range mine {
		p := &ps[m.Pair]
		if !p.answered {
			continue
		}
		win := window(&p.e.lim, now)
		p.sh.mu.Lock()
		pool := h.pool(&p.e.lim, p.rem)
		if p.e.lim.Mode == bouncer.Lease && now < p.e.until {
			// The units of its lease are counted in its region's store,
			// not in what the push left: they are this instance's to
			// spend, and part of what its allowance covers.
			pool += float64(p.e.units)
		}
		d := division{l: &p.e.lim, pool: pool, mine: m.Share.Demand, others: others[j], win: win,
			interval: h.interval, joining: p.joining, region: h.region, peers: h.peerNames, paces: p.e.pace(h.region, others[j], win), now: now}
		a, demands, static := d.allowance()
		e := p.e
		if !e.sharing {
			e.sharing, e.allowWin = true, win
		}
		if window(&e.lim, h.now().UnixNano()) == win {
			// Units admitted since the push are part of what it left.
			e.allow, e.allowWin = max(a-e.pending, 0), win
		}
		e.demands, e.static = demands, static
		s := m.Share
		s.Allowance, s.Window, s.Used = e.allow, e.allowWin, used(&e.lim, p.rem)
		if e.spent(now) {
			// No exchange of the pair until its window ends (see pending):
			// its share lives until then, so that the others still count
			// its demand at the next window's start.
			spentTTL = max(spentTTL, time.Duration(untilEnd(&e.lim, now))+ttl)
			spent = append(spent, len(at))
		}
		p.sh.mu.Unlock()
		pairs, shares, at = append(pairs, pairRequest(p.id.key, ledgerOf(p.e.lim), 1)), append(shares, s), append(at, p)
		others[len(at)-1] = others[j]
	}
	h.record(ctx, h.sharer, ttl, spentTTL, pairs, shares, spent)
	for k, p := range at {
		h.chargeSilent(ctx, p, others[k], now)
	}
	h.noteRegions(now, at, others[:len(at)], shares)
	h.relay(pairs, shares)
}
