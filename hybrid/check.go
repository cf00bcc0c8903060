package hybrid

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/calendar"
	"github.com/bouncerhq/bouncer/store"
)

// Check decides r: its strict limits in the shared store, its lease
// limits on leases, its async limits on the instance's view, all or
// nothing as the stores decide. A check whose limits are all strict, and
// every peek, goes to the shared store as it is.
func (h *Limiter) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	if err := store.Validate(r); err != nil {
		return bouncer.Decision{}, err
	}
	if r.Peek || !h.routesLocal(r) {
		h.stats.strict.Add(1)
		return h.shared.Check(ctx, r)
	}
	return h.checkLocal(ctx, r)
}

// checkLocal decides a valid r that has lease or async limits, or limits
// that share (see routesLocal).
func (h *Limiter) checkLocal(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	if !hasLocal(r) {
		// Strict limits only, some held to their share (regions): sent to
		// the shared store as they are, but for the share's denials.
		h.stats.strict.Add(1)
	}
	c := h.calls.Get().(*call)
	defer h.calls.Put(c)
	return c.check(ctx, h, r)
}

// part is one lease or async limit of a check: one (key, limit) pair,
// whose state is the entry id in shard sh.
//
// A lease part's cost is paid in one of three ways, which take decides:
// all from the lease the instance holds (took set, ask 0, use 0); from a
// new lease the shared store is asked for (ask > 0), toward which the
// too few units left of the old lease go (use); or, for a cold pair or
// one the entry table has no room for, by asking the shared store for
// the cost alone, as strict mode would (ask = cost). An async part is paid from the instance's view
// (checkView) and has no ask.
type part struct {
	key string
	l   *bouncer.Limit
	id  id
	sh  *shard

	// took reports that the cost is charged to the pair's lease in the
	// entry (spent from it by take, or out of a new lease by granted):
	// undo gives those units back to the lease.
	took bool
	// use is the units left of the pair's old lease that take moved out
	// of the entry toward the cost; the new lease asked for brings the
	// rest. If the ask is denied, granted puts them back.
	use int64
	// ask is the units asked of the shared store for the new lease
	// (lease size less use); 0: the lease paid, nothing is asked.
	ask int64
	req int // the index of its request in c.reqs
	// allowed reports that the cost is taken from the pair's share
	// allowance (see entry.ask): undo gives it back.
	allowed bool

	// d is the part's decision and known reports that it has one: set
	// when the lease paid (take), when the shared store answered an ask
	// (granted), or when the view allowed an async part (checkView).
	// merge counts only the known decisions.
	d     bouncer.Decision
	known bool
}

// call is the scratch of one check, pooled by the Limiter so that a
// check allocates nothing once warm. check runs its steps in order:
// split, cached, the pre-throttle, checkView, take, ask, merge, then
// settle if allowed or undo if not. The invariant every step keeps is
// all or nothing: a step that charges a store or a lease records it
// (localCharged, viewCharged, strictAllowed, part.took), so that undo
// gives back exactly what was charged when a later step denies or fails.
type call struct {
	parts []part
	// strict holds the check's strict limits (sent to the shared store
	// with the lease asks), local the limits the pre-throttle charges in
	// the local store, view the async limits charged to the instance's
	// view of the shared counts.
	strict, local bouncer.Request
	view          bouncer.Request
	limits        []bouncer.Limit // backing array for strict, local and view
	reqs          []bouncer.Request
	ds            []bouncer.Decision
	errs          []error
	strictReq     int              // index of the strict request in reqs; -1: none
	ld            bouncer.Decision // the pre-throttle's
	// localCharged reports that the pre-throttle allowed and charged
	// local: undo refunds it.
	localCharged bool
	// viewCharged reports that the view allowed and charged view: undo
	// refunds it.
	viewCharged bool
	// strictAllowed reports that the shared store allowed and charged the
	// strict limits: undo refunds them.
	strictAllowed bool
	degraded      bool  // a step decided by policy: the decision is Degraded
	retries       []int // parts whose ask is made again (see ask)
}

// split sorts r's limits into the call's parts and requests.
func (c *call) split(h *Limiter, r bouncer.Request) {
	n := 0
	for _, k := range r.Keys {
		n += len(k.Limits)
	}
	c.parts = c.parts[:0]
	c.limits = c.limits[:0]
	if cap(c.limits) < 3*n {
		c.limits = make([]bouncer.Limit, 0, 3*n)
	}
	c.strict = bouncer.Request{Cost: r.Cost, Keys: c.strict.Keys[:0]}
	c.local = bouncer.Request{Cost: r.Cost, Keys: c.local.Keys[:0]}
	c.view = bouncer.Request{Cost: r.Cost, Keys: c.view.Keys[:0]}
	c.localCharged, c.viewCharged, c.strictAllowed, c.degraded = false, false, false, false
	// An async limit's view holds the instance to at most what its own
	// admissions and the others' leave, less than the pre-throttle would:
	// it needs one only while syncs fail (and its view may not be asked).
	failing := h.syncFailing.Load()
	throttled := func(m bouncer.Mode) bool { return m == bouncer.Lease || m == bouncer.Async && failing }
	for _, k := range r.Keys {
		var s, l, v int
		for li := range k.Limits {
			lim := &k.Limits[li]
			switch lim.Mode {
			case bouncer.Strict:
				s++
				if !h.shares(lim) {
					continue
				}
			case bouncer.Async:
				v++
			}
			if throttled(lim.Mode) {
				l++
			}
			i := idOf(k.Key, lim)
			c.parts = append(c.parts, part{key: k.Key, l: lim, id: i, sh: h.shardOf(&i)})
		}
		if s > 0 {
			c.strict.Keys = append(c.strict.Keys, bouncer.KeyLimits{Key: k.Key, Limits: c.pick(k.Limits, s, func(m bouncer.Mode) bool { return m == bouncer.Strict })})
		}
		if l > 0 {
			c.local.Keys = append(c.local.Keys, bouncer.KeyLimits{Key: k.Key, Limits: c.pick(k.Limits, l, throttled)})
		}
		if v > 0 {
			c.view.Keys = append(c.view.Keys, bouncer.KeyLimits{Key: k.Key, Limits: c.pick(k.Limits, v, func(m bouncer.Mode) bool { return m == bouncer.Async })})
		}
	}
}

// pick returns the n limits of ls whose mode is kept, ls itself when
// that is all of them.
func (c *call) pick(ls []bouncer.Limit, n int, keep func(bouncer.Mode) bool) []bouncer.Limit {
	if n == len(ls) {
		return ls
	}
	start := len(c.limits)
	for _, l := range ls {
		if keep(l.Mode) {
			c.limits = append(c.limits, l)
		}
	}
	return c.limits[start:len(c.limits):len(c.limits)]
}

// check decides r (see Limiter.Check). Each step that can deny comes
// before the ones that cost more: the over-limit cache (no store), the
// pre-throttle (the local store), the view, and last the shared store,
// once for every ask and the strict limits together. Whatever denies
// after a charge is followed by undo.
func (c *call) check(ctx context.Context, h *Limiter, r bouncer.Request) (bouncer.Decision, error) {
	c.split(h, r)
	now := h.now().UnixNano()
	if d, ok := c.cached(h, r.Cost, now); ok {
		h.stats.cacheHits.Add(1)
		return d, nil
	}
	if len(c.local.Keys) > 0 {
		ld, err := h.local.Check(ctx, c.local)
		if err != nil || !ld.Allowed {
			if err == nil {
				h.stats.throttled.Add(1)
			}
			return ld, err
		}
		c.localCharged, c.ld = true, ld
	}
	if d, ok := c.held(h, r.Cost, now); ok {
		c.undo(ctx, h, r.Cost, now)
		return d, nil
	}
	if d, ok := c.checkView(ctx, h); !ok {
		c.undo(ctx, h, r.Cost, now)
		return d, nil
	}
	c.take(h, r.Cost, now)
	if err := c.ask(ctx, h, r.Cost, now); err != nil {
		c.undo(ctx, h, r.Cost, now)
		return bouncer.Decision{}, err
	}
	d, allowed := c.merge(h, now)
	if !allowed {
		c.undo(ctx, h, r.Cost, now)
		return d, nil
	}
	c.settle(h, r.Cost, now)
	return d, nil
}

// cached returns the denial cached for a part, if one holds for cost
// now.
func (c *call) cached(h *Limiter, cost, now int64) (bouncer.Decision, bool) {
	if now >= h.denialsEnd.Load() {
		return bouncer.Decision{}, false
	}
	for i := range c.parts {
		p := &c.parts[i]
		p.sh.mu.Lock()
		e := p.sh.m[p.id]
		var until int64
		var d bouncer.Decision
		if e != nil {
			until, d = e.deniedFor(p.l, cost), e.denied
		}
		p.sh.mu.Unlock()
		if now >= until {
			continue
		}
		if d.RetryAfter != bouncer.Never {
			d.RetryAfter = time.Duration(until - now)
		}
		d.ResetAfter = max(d.ResetAfter-time.Duration(now-e.deniedAt), 0)
		return d, true
	}
	return bouncer.Decision{}, false
}

// deniedFor is until when e's cached denial denies a check of cost (0:
// it does not). A denial holds for its cost or more. A smaller cost that
// the denied check's remaining could not pass either is denied too: by a
// fixed window until it ends, by a bucket, which refills one unit an
// interval, as much sooner as the units it needs less.
func (e *entry) deniedFor(l *bouncer.Limit, cost int64) int64 {
	switch {
	case cost >= e.deniedCost:
		return e.deniedUntil
	case cost <= e.denied.Remaining || e.deniedUntil == math.MaxInt64:
		return 0
	case l.Algorithm == bouncer.FixedWindow:
		return e.deniedUntil
	case l.Algorithm.UsesBurst():
		return e.deniedUntil - (e.deniedCost-cost)*int64(l.Interval())
	}
	return 0
}

// checkView charges the async parts to the instance's view, unless syncs
// fail and their policy says otherwise.
func (c *call) checkView(ctx context.Context, h *Limiter) (bouncer.Decision, bool) {
	if len(c.view.Keys) == 0 {
		return bouncer.Decision{}, true
	}
	if h.syncFailing.Load() {
		c.degraded = true
		switch h.policyOf(&c.view) {
		case bouncer.StoreErrorAllow:
			return bouncer.Decision{}, true
		case bouncer.StoreErrorDeny:
			k := c.view.Keys[0]
			return bouncer.Decision{Capacity: k.Limits[0].Capacity(), RetryAfter: h.interval, Key: k.Key, LimitName: k.Limits[0].Name, Degraded: true}, false
		}
	}
	d, err := h.view.Check(ctx, c.view)
	if err != nil || !d.Allowed {
		d.Degraded = c.degraded
		return d, false
	}
	c.viewCharged = true
	for i := range c.parts {
		if p := &c.parts[i]; p.l.Mode == bouncer.Async {
			p.d, p.known = d, true
		}
	}
	return d, true
}

// held returns a denial for the first part that shares (see
// Limiter.shares) whose pair owes the shared store units it could not
// take yet, or whose share is spent (see entry.ask). Every such part's
// demand is noted first; the parts whose allowance paid are marked, for
// undo.
func (c *call) held(h *Limiter, cost, now int64) (bouncer.Decision, bool) {
	failing := h.syncFailing.Load()
	for i := range c.parts {
		p := &c.parts[i]
		if !h.shares(p.l) {
			continue
		}
		p.sh.mu.Lock()
		e := h.get(p.sh, p.id, p.l, now)
		debt, ok := false, true
		if e != nil {
			debt = e.debt > 0
			ok = e.ask(p.l, cost, now, failing)
			p.allowed = ok && e.sharing && !failing
			if !e.dirty && hasLedger(p.l) && h.chargedAcross(p.l) {
				// Its demand is shared at the next sync, denied or not
				// (see nearLimit).
				e.dirty = true
				p.sh.dirty = append(p.sh.dirty, p.id)
			}
		}
		p.sh.mu.Unlock()
		if debt || !ok {
			if !debt {
				h.stats.shareDenied.Add(1)
			}
			d := bouncer.Decision{Capacity: p.l.Capacity(), RetryAfter: h.interval, ResetAfter: h.interval, Key: p.key, LimitName: p.l.Name}
			if p.l.Algorithm == bouncer.FixedWindow {
				d.ResetAfter = time.Duration(untilEnd(p.l, now))
			}
			return d, true
		}
	}
	return bouncer.Decision{}, false
}

// policyOf is the strictest policy of r's limits while syncs fail: deny
// over local over allow.
func (h *Limiter) policyOf(r *bouncer.Request) bouncer.StoreErrorPolicy {
	pol := bouncer.StoreErrorAllow
	for _, k := range r.Keys {
		for _, l := range k.Limits {
			p := h.policy.For(l)
			if p == bouncer.StoreErrorDeny {
				return p
			}
			if p == bouncer.StoreErrorLocal {
				pol = p
			}
		}
	}
	return pol
}

// take pays each lease part's cost from its lease, or sizes the lease
// it asks for. The lease invariant is kept here and in granted: the
// instance spends only units the shared store has charged, before the
// lease's end (until), so the shared store never counts fewer units
// than the instance admits; the units a lease parks are the most it can
// be ahead of another instance.
func (c *call) take(h *Limiter, cost, now int64) {
	for i := range c.parts {
		p := &c.parts[i]
		if p.l.Mode != bouncer.Lease {
			continue
		}
		p.took, p.ask, p.use = false, 0, 0
		p.sh.mu.Lock()
		e := h.get(p.sh, p.id, p.l, now)
		switch {
		case e == nil:
			p.ask = cost // no room: strict
		case e.units >= cost && now < e.until:
			e.units -= cost
			e.asked += cost
			h.stats.unitsParked.Add(-cost)
			p.took = true
			p.d = e.decision(p, now)
			p.known = true
		default:
			// The units left, too few, go toward the cost with the new
			// lease, which lives no longer than they would have.
			e.asked += cost
			if now < e.until && e.units > 0 {
				p.use, e.units = e.units, 0
				h.stats.unitsParked.Add(-p.use)
			}
			p.ask = h.size(e, p.l, cost, now) - p.use
		}
		p.sh.mu.Unlock()
	}
}

// ask sends the leases asked for and the strict limits to the shared
// store in one go, and a second time the leases larger than the check's
// cost that were denied, for what the shared limit had left (or the
// cost). Every answer is recorded by granted, which makes it the part's
// decision (known). A strict limit's invariant is the shared store's
// own: it is charged only there, in the same call as the asks.
func (c *call) ask(ctx context.Context, h *Limiter, cost, now int64) error {
	c.reqs, c.strictReq = c.reqs[:0], -1
	for i := range c.parts {
		p := &c.parts[i]
		if p.ask > 0 {
			p.req = len(c.reqs)
			c.reqs = append(c.reqs, leaseRequest(p, p.ask))
		}
	}
	if len(c.strict.Keys) > 0 {
		c.strictReq = len(c.reqs)
		c.reqs = append(c.reqs, c.strict)
	}
	if len(c.reqs) == 0 {
		return nil
	}
	c.ds, c.errs = bouncer.CheckEach(ctx, h.shared, c.reqs, c.ds, c.errs)
	if err := c.firstErr(); err != nil {
		return err
	}
	if c.strictReq >= 0 {
		c.strictAllowed = c.ds[c.strictReq].Allowed
		c.degraded = c.degraded || c.ds[c.strictReq].Degraded
	}
	c.retries = c.retries[:0]
	for i := range c.parts {
		p := &c.parts[i]
		if p.ask == 0 {
			continue
		}
		d := c.ds[p.req]
		if !d.Allowed && !d.Degraded && p.ask+p.use > cost {
			// Again for what was left, if that covers the cost.
			p.ask = max(cost, min(d.Remaining, p.ask+p.use)) - p.use
			c.retries = append(c.retries, i)
			continue
		}
		h.granted(p, d, cost, now)
	}
	return c.retry(ctx, h, cost, now)
}

// retry asks again, at the check's cost, for the leases in c.retries.
func (c *call) retry(ctx context.Context, h *Limiter, cost, now int64) error {
	if len(c.retries) == 0 {
		return nil
	}
	c.reqs = c.reqs[:0]
	for _, i := range c.retries {
		p := &c.parts[i]
		p.req = len(c.reqs)
		c.reqs = append(c.reqs, leaseRequest(p, p.ask))
	}
	c.ds, c.errs = bouncer.CheckEach(ctx, h.shared, c.reqs, c.ds, c.errs)
	if err := c.firstErr(); err != nil {
		return err
	}
	for _, i := range c.retries {
		p := &c.parts[i]
		h.granted(p, c.ds[p.req], cost, now)
	}
	return nil
}

func (c *call) firstErr() error {
	for _, err := range c.errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// pairRequest is a request of n units of key under l alone.
func pairRequest(key string, l bouncer.Limit, n int64) bouncer.Request {
	return bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: n}
}

// leaseRequest asks the shared store for n units of p's limit.
func leaseRequest(p *part, n int64) bouncer.Request {
	return pairRequest(p.key, *p.l, n)
}

// merge returns the check's decision over its parts and strict limits,
// and whether all allowed: the binding limit as the stores choose it
// (binds), the longest RetryAfter and Delay, Degraded if any step was
// decided by policy. A part with no known decision (an async part
// allowed by policy while syncs fail) does not count; if none does, the
// pre-throttle's decision stands for the check.
func (c *call) merge(h *Limiter, now int64) (bouncer.Decision, bool) {
	var d bouncer.Decision
	first, allowed := true, true
	add := func(x bouncer.Decision) {
		allowed = allowed && x.Allowed
		d.Degraded = d.Degraded || x.Degraded
		d.RetryAfter = max(d.RetryAfter, x.RetryAfter)
		d.Delay = max(d.Delay, x.Delay)
		if first || binds(&x, &d) {
			d.Capacity, d.Remaining, d.ResetAfter, d.Key, d.LimitName = x.Capacity, x.Remaining, x.ResetAfter, x.Key, x.LimitName
		}
		first = false
	}
	for i := range c.parts {
		p := &c.parts[i]
		if p.known {
			add(p.d)
		}
	}
	if c.strictReq >= 0 {
		add(c.ds[c.strictReq])
	}
	if first { // async parts allowed by policy alone
		add(c.ld)
	}
	d.Allowed = allowed
	d.Degraded = d.Degraded || c.degraded
	if allowed {
		d.RetryAfter = 0
	} else {
		d.Delay = 0
	}
	return d, allowed
}

// binds reports whether x binds over d: less remaining, then the longer
// retry, then the longer reset. A denial binds over an allowance.
func binds(x, d *bouncer.Decision) bool {
	if x.Allowed != d.Allowed {
		return !x.Allowed
	}
	if x.Remaining != d.Remaining {
		return x.Remaining < d.Remaining
	}
	if x.RetryAfter != d.RetryAfter {
		return x.RetryAfter > d.RetryAfter
	}
	return x.ResetAfter > d.ResetAfter
}

// undo gives back what a check that is not allowed took: its lease
// units, its view and local charges, and its strict limits' charge.
func (c *call) undo(ctx context.Context, h *Limiter, cost, now int64) {
	for i := range c.parts {
		p := &c.parts[i]
		if !p.took {
			continue
		}
		p.sh.mu.Lock()
		if e := p.sh.m[p.id]; e != nil && now < e.until {
			e.units += cost
			h.stats.unitsParked.Add(cost)
		}
		p.sh.mu.Unlock()
		p.took = false
	}
	for i := range c.parts {
		if p := &c.parts[i]; p.allowed {
			p.sh.mu.Lock()
			if e := p.sh.m[p.id]; e != nil && e.allowWin == window(p.l, now) {
				e.allow += cost
			}
			p.sh.mu.Unlock()
			p.allowed = false
		}
	}
	if c.viewCharged {
		_ = h.view.Refund(ctx, c.view)
	}
	if c.localCharged {
		_ = h.local.Refund(ctx, c.local)
	}
	if c.strictAllowed {
		_ = h.shared.Refund(ctx, c.strict)
	}
}

// settle counts an allowed check: its async units wait for the next
// push. The async invariant is kept here and in sync: every unit the
// view admits is pending until it is pushed to the shared store (or is
// a debt that blocks the pair until pushed), so that an instance is at
// most one sync interval's admissions ahead of the shared count.
func (c *call) settle(h *Limiter, cost, now int64) {
	for i := range c.parts {
		p := &c.parts[i]
		switch p.l.Mode {
		case bouncer.Lease:
			h.stats.lease.Add(1)
		case bouncer.Async:
			h.stats.async.Add(1)
		}
		if h.shares(p.l) {
			// An async pair's units wait for the next push; a strict or
			// lease pair's, counted by the shared store already, only tell
			// whether it nears its limit (see pending), and are never
			// pushed.
			p.sh.mu.Lock()
			if e := h.get(p.sh, p.id, p.l, now); e != nil {
				if w := window(p.l, now); w != e.pendingWin {
					e.pending, e.pendingWin = 0, w
				}
				e.pending += cost
				if !e.dirty {
					e.dirty = true
					p.sh.dirty = append(p.sh.dirty, p.id)
				}
			}
			p.sh.mu.Unlock()
		}
	}
}

// window is the fixed window of l that holds now (0 for the other
// algorithms): its index from the Unix epoch, or a calendar window's
// start.
func window(l *bouncer.Limit, now int64) int64 {
	if l.Algorithm != bouncer.FixedWindow {
		return 0
	}
	if !l.Calendar.IsZero() {
		start, _ := calendarWindow(l.Calendar, now)
		return start
	}
	return now / int64(l.Period)
}

// untilEnd is the time from now to the end of l's fixed window that
// holds now.
func untilEnd(l *bouncer.Limit, now int64) int64 {
	if !l.Calendar.IsZero() {
		_, end := calendarWindow(l.Calendar, now)
		return end - now
	}
	return int64(l.Period) - now%int64(l.Period)
}

// calendars keeps the window each calendar period found last.
var calendars sync.Map // calendar.Period → *calendar.Windows

func calendarWindow(p calendar.Period, now int64) (start, end int64) {
	w, ok := calendars.Load(p)
	if !ok {
		w, _ = calendars.LoadOrStore(p, calendar.NewWindows(p))
	}
	return w.(*calendar.Windows).At(now)
}

// CheckEach decides rs[i] into ds[i] and errs[i], each on its own (see
// store.EachLimiter): the requests whose limits are all strict go to
// the shared store together, the others are checked here one by one.
func (h *Limiter) CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error) {
	var strict []bouncer.Request
	var at []int
	for i, r := range rs {
		if err := store.Validate(r); err != nil {
			ds[i], errs[i] = bouncer.Decision{}, err
			continue
		}
		if r.Peek || !h.routesLocal(r) {
			strict, at = append(strict, r), append(at, i)
			continue
		}
		ds[i], errs[i] = h.checkLocal(ctx, r)
	}
	if len(strict) == 0 {
		return
	}
	if len(strict) == len(rs) {
		h.stats.strict.Add(uint64(len(rs)))
		bouncer.CheckEach(ctx, h.shared, rs, ds, errs)
		return
	}
	h.stats.strict.Add(uint64(len(strict)))
	sds, serrs := bouncer.CheckEach(ctx, h.shared, strict, nil, nil)
	for j, i := range at {
		ds[i], errs[i] = sds[j], serrs[j]
	}
}
