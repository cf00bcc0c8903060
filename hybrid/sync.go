package hybrid

import (
	"context"

	"github.com/bouncerhq/bouncer"
)

// push is one async pair's usage on its way to the shared store.
type push struct {
	id id
	e  *entry
	sh *shard
	n  int64
}

// sync pushes the units the async pairs admitted since the last push to
// the shared store, a request each, all in one go; each reply's
// remaining becomes the pair's view. A push the shared store denies had
// less room than the instance admitted: what fits is pushed, and the
// view is empty.
func (h *Limiter) sync(ctx context.Context) {
	ps := h.pending()
	if len(ps) == 0 {
		return
	}
	h.stats.syncs.Add(1)
	rs := make([]bouncer.Request, len(ps))
	for k := range ps {
		rs[k] = pushRequest(&ps[k], ps[k].n)
	}
	ds, errs := bouncer.CheckEach(ctx, h.shared, rs, nil, nil)
	failed := false
	var rest []bouncer.Request
	for k := range ps {
		p, d := &ps[k], ds[k]
		switch {
		case errs[k] != nil || d.Degraded:
			failed = true
			h.requeue(p)
		case d.Allowed:
			h.reconcile(ctx, p, d.Remaining)
		default:
			h.stats.overAdmitted.Add(p.n - d.Remaining)
			if d.Remaining > 0 {
				rest = append(rest, pushRequest(p, d.Remaining))
			}
			h.reconcile(ctx, p, 0)
		}
	}
	if len(rest) > 0 {
		bouncer.CheckEach(ctx, h.shared, rest, ds, errs)
	}
	h.syncFailing.Store(failed)
}

// pending takes the async pairs' pending units.
func (h *Limiter) pending() []push {
	var ps []push
	now := h.now().UnixNano()
	for s := range h.shards {
		sh := &h.shards[s]
		sh.mu.Lock()
		for _, i := range sh.dirty {
			e := sh.m[i]
			if e == nil {
				continue
			}
			e.dirty = false
			if window(&e.lim, now) != e.pendingWin {
				e.pending = 0 // its window is over
			}
			if e.pending > 0 {
				ps = append(ps, push{id: i, e: e, sh: sh, n: e.pending})
				e.pending = 0
			}
		}
		sh.dirty = sh.dirty[:0]
		sh.mu.Unlock()
	}
	return ps
}

func pushRequest(p *push, n int64) bouncer.Request {
	return bouncer.Request{Keys: []bouncer.KeyLimits{{Key: p.id.key, Limits: []bouncer.Limit{p.e.lim}}}, Cost: n}
}

// requeue puts back a push that failed, for the next.
func (h *Limiter) requeue(p *push) {
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	p.e.pending += p.n
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
	r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: p.id.key, Limits: []bouncer.Limit{p.e.lim}}}, Peek: true}
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
