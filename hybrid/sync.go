package hybrid

import (
	"context"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// push is one async pair's usage on its way to the shared store: n
// units, debt of them owed by earlier pushes.
type push struct {
	id      id
	e       *entry
	sh      *shard
	n, debt int64
	// share reports that the pair shares (see exchange), joining that it
	// starts to; answered that the shared store answered its push,
	// leaving rem units.
	share, joining, answered bool
	rem                      int64
}

// sync pushes the units the async pairs admitted since the last push to
// the shared store, a request each, all in one go; each reply's
// remaining becomes the pair's view. A push the shared store denies had
// less room than the instance admitted: what fits is pushed, the view is
// emptied, and the rest is a debt, pushed again at every sync until the
// shared limit takes it; the pair admits nothing meanwhile. So every
// unit admitted is counted in the shared store in the end, and an
// instance is never more than one interval's admissions ahead of it.
// With a shared store that keeps shares, the pairs that share exchange
// their shares in the same call (see exchange).
func (h *Limiter) sync(ctx context.Context, closing bool) {
	ps, waiting := h.pending(closing)
	if len(ps) == 0 {
		h.probe(ctx, waiting)
		return
	}
	h.stats.syncs.Add(1)
	failed, all := 0, ps
	for len(ps) > 0 {
		n := min(len(ps), pushChunk)
		failed += h.push(ctx, ps[:n])
		ps = ps[n:]
	}
	// Syncs fail when most pushes do (Redis down, not one slow call):
	// the pushes that failed are made again at the next either way.
	h.syncFailing.Store(failed > 0 && 2*failed >= len(all))
	h.wakeRelays() // the charges owed to other regions (see owe)
}

// pushChunk is how many pushes one call carries: a sync of more sends
// them a chunk after another, so that every call of the store's starts
// within its deadline.
const pushChunk = 256

// push sends ps to the shared store, with the shares of those that
// share, and settles each reply; it returns how many failed.
func (h *Limiter) push(ctx context.Context, ps []push) int {
	rs := make([]bouncer.Request, len(ps))
	for k := range ps {
		rs[k] = pushRequest(&ps[k], ps[k].n)
	}
	mine := h.mine(ps)
	var others [][]store.Share
	ds, errs := make([]bouncer.Decision, len(ps)), make([]error, len(ps))
	if len(mine) > 0 {
		var err error
		others, err = h.sharer.SyncShares(ctx, shareTTLIntervals*h.interval, rs, ds, mine)
		for k := range errs {
			errs[k] = err
		}
		if err == nil {
			h.stats.exchanges.Add(1)
		}
	} else {
		bouncer.CheckEach(ctx, h.shared, rs, ds, errs)
	}
	failed := 0
	var rest []bouncer.Request
	for k := range ps {
		p, d := &ps[k], ds[k]
		switch {
		case errs[k] != nil || d.Degraded:
			failed++
			h.requeue(p, p.n-p.debt, p.debt)
			h.lastPush.Store(&rs[k])
		case d.Allowed:
			p.answered, p.rem = true, d.Remaining
			if p.e.lim.Mode == bouncer.Async {
				h.reconcile(ctx, p, d.Remaining)
			}
			h.noteRoom(p, d.Remaining)
			h.owe(p.id.key, &p.e.lim, p.n-p.debt)
		default:
			p.answered = true
			h.owe(p.id.key, &p.e.lim, p.n-p.debt)
			h.noteRoom(p, 0)
			fits := max(d.Remaining, 0)
			h.stats.overAdmitted.Add(max(p.n-fits-p.debt, 0))
			switch c, ok := h.shared.(store.Charger); {
			case ok && h.chargedAcross(&p.e.lim):
				// Its state counts every region's admissions, which a
				// denial would leave out: the units are charged, and
				// the division holds the pair to its share.
				if c.Charge(ctx, pushRequest(p, p.n)) != nil {
					h.requeue(p, p.n-p.debt, p.debt)
				}
			default:
				if fits > 0 {
					rest = append(rest, pushRequest(p, fits))
				}
				h.requeue(p, 0, p.n-fits)
			}
			if p.e.lim.Mode == bouncer.Async {
				h.reconcile(ctx, p, 0)
			}
		}
	}
	if len(rest) > 0 {
		bouncer.CheckEach(ctx, h.shared, rest, ds, errs)
	}
	if others != nil {
		h.exchange(ctx, ps, mine, others)
	}
	return failed
}

// probe asks the shared store, when a sync has nothing to push, whether
// it answers, with a peek: of a pair whose push waits (see canWait), or,
// while syncs fail, of the last push that failed (under a deny policy
// nothing is admitted, so no push would ever say Redis is back). So the
// policy decides while Redis is down whether or not usage is pushed.
func (h *Limiter) probe(ctx context.Context, waiting *push) {
	var r *bouncer.Request
	switch {
	case waiting != nil:
		req := pushRequest(waiting, 0)
		r = &req
	case h.syncFailing.Load():
		r = h.lastPush.Load()
	}
	if r == nil {
		return
	}
	peek := bouncer.Request{Keys: r.Keys, Peek: true}
	d, err := h.shared.Check(ctx, peek)
	failing := err != nil || d.Degraded
	if failing {
		h.lastPush.Store(&peek)
	}
	h.syncFailing.Store(failing)
}

// pending takes the async pairs' pending units, and returns a pair whose
// push waits, if one does; when closing, none waits.
func (h *Limiter) pending(closing bool) (ps []push, waiting *push) {
	now := h.now().UnixNano()
	for s := range h.shards {
		sh := &h.shards[s]
		sh.mu.Lock()
		var again []id
		for _, i := range sh.dirty {
			e := sh.m[i]
			if e == nil {
				continue
			}
			e.dirty = false
			if window(&e.lim, now) != e.pendingWin {
				e.pending, e.debt = 0, 0 // its window is over
			}
			if !closing && e.canWait(now) {
				e.dirty = true
				again = append(again, i)
				if waiting == nil {
					waiting = &push{id: i, e: e, sh: sh}
				}
				continue
			}
			share := h.sharer != nil && e.nearLimit(now)
			if !share {
				e.sharing = false
			}
			// A push is at most the limit's capacity (more could never
			// pass); the rest stays a debt for the next. A strict or lease
			// fixed window that shares pushes nothing: its push is a peek,
			// for what its region's store has left; a strict or lease
			// bucket's goes to its ledger (see ledgerOf).
			total := e.pending + e.debt
			if e.lim.Mode != bouncer.Async && e.lim.Algorithm == bouncer.FixedWindow {
				total = 0
			}
			n := min(total, e.lim.Capacity())
			if n > 0 || share && !e.spent(now) {
				ps = append(ps, push{id: i, e: e, sh: sh, n: n, debt: min(e.debt, n), share: share})
			}
			e.pending, e.debt = 0, total-n
			if e.debt > 0 || share {
				e.dirty = true
				again = append(again, i)
			}
		}
		sh.dirty = append(sh.dirty[:0], again...)
		sh.mu.Unlock()
	}
	return ps, waiting
}

// pushRequest is p's push of n units; of none, a peek (a pair that
// shares is pushed at every sync, to learn what is left).
func pushRequest(p *push, n int64) bouncer.Request {
	r := pairRequest(p.id.key, ledgerOf(p.e.lim), n)
	r.Peek = n == 0
	return r
}

// noteRoom records what p's fixed window had left after its push.
func (h *Limiter) noteRoom(p *push, remaining int64) {
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	p.e.room, p.e.roomWin, p.e.pushed = remaining, window(&p.e.lim, h.now().UnixNano()), true
}

// requeue puts back units of a push for the next: pending ones, and a
// debt.
func (h *Limiter) requeue(p *push, pending, debt int64) {
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	p.e.pending += pending
	p.e.debt += debt
	if !p.e.dirty {
		p.e.dirty = true
		p.sh.dirty = append(p.sh.dirty, p.id)
	}
}

// reconcile brings p's view to remaining, less what the instance admitted
// since the push.
func (h *Limiter) reconcile(ctx context.Context, p *push, remaining int64) {
	p.sh.mu.Lock()
	target := max(remaining-p.e.pending, 0)
	p.sh.mu.Unlock()
	r := pairRequest(p.id.key, p.e.lim, 0)
	r.Peek = true
	vd, err := h.view.Check(ctx, r)
	if err != nil {
		return
	}
	r.Peek = false
	switch rv := vd.Remaining; {
	case rv > target:
		r.Cost = rv - target
		_, _ = h.view.Check(ctx, r)
	case rv < target:
		r.Cost = target - rv
		_ = h.view.Refund(ctx, r)
	}
}

// waitShare is how far below what a fixed window has left a pair's
// pending units must be for its push to wait: each instance then holds
// back less than a sixteenth of the window.
const waitShare = 16

// canWait reports whether e's push can wait for a later sync: a fixed
// window's units far below what it had left at its last push in this
// window (or its rate, in a window it has not pushed in), owing nothing.
// Those units are pushed once they near it, or not at all if the window
// ends first, when they no longer count. Every instance holding back
// less than a sixteenth of the rate keeps async mode within its bound,
// and a key far below its limit costs Redis nothing (BenchmarkRLS: 10 000
// keys a few times a second each, of 1 000 000 a second).
func (e *entry) canWait(now int64) bool {
	if e.lim.Algorithm != bouncer.FixedWindow || e.debt > 0 || e.pending == 0 || e.sharing {
		return false
	}
	return e.pending*waitShare < e.roomNow(now)
}

// spent reports that e's fixed window had nothing left at its last push
// in this window, and the instance no allowance: until the window ends a
// push or an exchange of the pair would learn nothing.
func (e *entry) spent(now int64) bool {
	w := window(&e.lim, now)
	return e.lim.Algorithm == bouncer.FixedWindow && e.pushed && e.roomWin == w && e.room <= 0 && e.allowWin == w && e.allow <= 0
}

// roomNow is what e's limit had left at its last push: in a fixed window
// not pushed in yet, its rate; for a bucket never pushed, its capacity.
func (e *entry) roomNow(now int64) int64 {
	if e.roomWin == window(&e.lim, now) && (e.pushed || e.lim.Algorithm == bouncer.FixedWindow) {
		return e.room
	}
	return e.lim.Capacity()
}

// nearLimit reports whether e's pair should share (see exchange): it
// shares already and was asked for in the last shareTTLIntervals syncs
// (a quiet interval or two of a pair near its limit does not make it
// start again as a newcomer), or its units pending are a sixteenth of
// what it had left or more; a strict or lease bucket of regions, whenever
// it is asked for (see ledgerOf): the others learn its demand before
// they take the whole ledger.
func (e *entry) nearLimit(now int64) bool {
	if e.sharing {
		if e.wanted > 0 {
			e.quiet = 0
		} else {
			e.quiet++
		}
		return e.quiet < shareTTLIntervals
	}
	return hasLedger(&e.lim) && e.wanted > 0 || e.debt > 0 || e.pending > 0 && e.pending*waitShare >= e.roomNow(now)
}
