package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
)

// ref is one limit of one key of a request, as a script call names it.
type ref struct {
	key   string // the request's key
	limit *bouncer.Limit
	info  *limitInfo
	rkey  string  // its Redis key: the bucket's hash, or the log's set
	field [8]byte // its field in the hash
}

// check is what one script call decides of one request: the limits of
// the request's keys that share a group (on a Cluster: a slot), or all of
// them on a standalone server.
type check struct {
	refs    []ref
	cost    int64
	flag    byte // 1: decided as denied elsewhere (see lua/check.lua)
	group   int
	node    *node    // whose breaker it answers to (nodeOf)
	res     []result // room for its results
	allowed bool     // set by decodeReply
}

// result is one limit's part of a reply.
type result struct {
	ref       *ref
	allowed   bool
	remaining int64
	reset     time.Duration
	retry     time.Duration // -1: never
	delay     time.Duration
}

// Check decides r; see bouncer.Limiter. Each script call gets the store's
// Timeout; when Redis cannot answer, every limit decides by its
// StoreErrorPolicy and the decision is marked Degraded. A caller that
// cancels ctx gets an error wrapping context.Canceled instead of a
// decision (see fallback).
func (s *Store) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	if !s.ready.Load() {
		if err := s.validate(r); err != nil {
			return bouncer.Decision{}, err
		}
		return s.fallback(ctx, r, s.errConnecting())
	}
	cs, err := s.plan(r)
	if err != nil {
		return bouncer.Decision{}, err
	}
	if len(cs) == 1 {
		res, err := s.decide(ctx, &cs[0])
		if err != nil {
			return s.fallback(ctx, r, err)
		}
		return merge(res, cs[0].allowed), nil
	}
	return s.checkInTurn(ctx, r, cs)
}

// decide runs c, a request's one call, batched with others if its node's
// breaker is closed, else on its own through the breaker.
func (s *Store) decide(ctx context.Context, c *check) ([]result, error) {
	if s.nodeOf(c).open.Load() {
		return s.run(ctx, opCheck, c)
	}
	return s.submit(ctx, c)
}

// checkInTurn decides a request whose keys fall in several groups of a
// Cluster: a call per group, in turn. When a call denies, the calls
// before it are refunded (but for their limits that charge denied
// checks, which keep the charge), and the calls after it charge only
// those limits; when one fails, the calls before it are refunded and the
// request decides by policy.
func (s *Store) checkInTurn(ctx context.Context, r bouncer.Request, cs []check) (bouncer.Decision, error) {
	var all []result
	for i := range cs {
		res, err := s.run(ctx, opCheck, &cs[i])
		if err != nil {
			s.refundAll(ctx, cs[:i], func(*ref) bool { return true })
			return s.fallback(ctx, r, err)
		}
		all = append(all, res...)
		if !cs[i].allowed {
			if r.Cost > 0 {
				s.refundAll(ctx, cs[:i], func(rf *ref) bool { return !rf.limit.ChargeDenied })
				for j := i + 1; j < len(cs); j++ {
					c := cs[j]
					c.refs, c.flag = nil, 1
					for _, rf := range cs[j].refs {
						if rf.limit.ChargeDenied {
							c.refs = append(c.refs, rf)
						}
					}
					if len(c.refs) > 0 {
						s.run(ctx, opCheck, &c)
					}
				}
			}
			return merge(all, false), nil
		}
	}
	return merge(all, true), nil
}

// refundAll gives the cost of cs back to the limits keep selects, best
// effort, whether or not the caller still waits: a caller that canceled
// between its calls is owed the refund all the same.
func (s *Store) refundAll(ctx context.Context, cs []check, keep func(*ref) bool) {
	ctx = context.WithoutCancel(ctx)
	for i := range cs {
		c := cs[i]
		if c.cost <= 0 {
			continue
		}
		c.refs = nil
		for _, rf := range cs[i].refs {
			if keep(&rf) {
				c.refs = append(c.refs, rf)
			}
		}
		if len(c.refs) > 0 {
			s.run(ctx, opRefund, &c)
		}
	}
}

var _ bouncer.EachLimiter = (*Store)(nil)

// CheckEach decides each of rs on its own, as Check would; see
// bouncer.EachLimiter. The checks of one call each are submitted
// together, so that those of one group go out in the same script call.
func (s *Store) CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error) {
	if !s.ready.Load() || len(rs) == 1 {
		for i := range rs {
			ds[i], errs[i] = s.Check(ctx, rs[i])
		}
		return
	}
	var cbuf [8]*check
	var ibuf [8]int
	cs, idx := cbuf[:0], ibuf[:0]
	for i, r := range rs {
		planned, err := s.plan(r)
		switch {
		case err != nil:
			ds[i], errs[i] = bouncer.Decision{}, err
		case len(planned) == 1 && !s.nodeOf(&planned[0]).open.Load():
			cs, idx = append(cs, &planned[0]), append(idx, i)
		default:
			ds[i], errs[i] = s.Check(ctx, r)
		}
	}
	if len(cs) == 0 {
		return
	}
	res, cerrs := s.submitEach(ctx, cs)
	for k, i := range idx {
		if cerrs[k] != nil {
			ds[i], errs[i] = s.fallback(ctx, rs[i], cerrs[k])
			continue
		}
		ds[i], errs[i] = merge(res[k], cs[k].allowed), nil
	}
}

// Refund gives r.Cost back to every limit of every key in r; see
// bouncer.Limiter. Refunds are not retried: a refund that fails is lost
// and returned as an error.
func (s *Store) Refund(ctx context.Context, r bouncer.Request) error {
	return s.apply(ctx, opRefund, r)
}

var _ bouncer.Resetter = (*Store)(nil)

// Reset forgets the state of every limit of every key in r, as if they
// had never been checked; see bouncer.Resetter. It fails, changing nothing
// on the nodes it could not reach, when Redis cannot answer.
func (s *Store) Reset(ctx context.Context, r bouncer.Request) error {
	return s.apply(ctx, opReset, r)
}

func (s *Store) apply(ctx context.Context, o op, r bouncer.Request) error {
	if o == opReset {
		r.Cost, r.Peek = 1, false // a reset has none; any valid cost passes validation
	}
	if !s.ready.Load() {
		if err := s.validate(r); err != nil {
			return err
		}
		return s.errConnecting()
	}
	cs, err := s.plan(r)
	if err != nil {
		return err
	}
	var errs []error
	for i := range cs {
		if _, err := s.run(ctx, o, &cs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validate reports what plan would reject in r, without Redis.
func (s *Store) validate(r bouncer.Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	for _, k := range r.Keys {
		for j := range k.Limits {
			if li := s.info(&k.Limits[j]); li.err != nil {
				return li.err
			}
		}
	}
	return nil
}

// plan validates r and builds its script calls: one on a standalone
// server; on a Cluster, one per group its keys fall in (all limits of one
// key share a group).
func (s *Store) plan(r bouncer.Request) ([]check, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	n := 0
	for _, k := range r.Keys {
		n += len(k.Limits)
	}
	// The common request, one key under one limit, takes one allocation
	// for its call, its reference and its result.
	var one *oneCheck
	var cs []check
	if n == 1 {
		one = new(oneCheck)
		cs = one.check[:0]
	} else {
		cs = make([]check, 0, 1)
	}
	for _, k := range r.Keys {
		d := digestOf(k.Key, s.buckets)
		ci := 0
		switch {
		case s.cluster:
			g := s.groupOf(d.bucket)
			ci = -1
			for c := range cs {
				if cs[c].group == g {
					ci = c
					break
				}
			}
			if ci < 0 {
				cs = append(cs, check{cost: r.Cost, group: g})
				ci = len(cs) - 1
			}
		case len(cs) == 0:
			cs = append(cs, check{cost: r.Cost})
		}
		c := &cs[ci]
		switch {
		case one != nil:
			c.refs, c.res = one.ref[:0], one.res[:0]
		case c.refs == nil:
			c.refs = make([]ref, 0, n)
		}
		for j := range k.Limits {
			l := &k.Limits[j]
			li := s.info(l)
			if li.err != nil {
				return nil, li.err
			}
			rf := ref{key: k.Key, limit: l, info: li, field: d.field}
			if li.log {
				rf.rkey = s.logKey(li.id, d)
			} else {
				rf.rkey = s.hashKey(li.id, d.bucket)
			}
			c.refs = append(c.refs, rf)
		}
	}
	return cs, nil
}

// oneCheck is the call of a request of one key under one limit, with its
// reference and result.
type oneCheck struct {
	check [1]check
	ref   [1]ref
	res   [1]result
}

// errBreakerOpen is the error of a call the breaker kept from Redis.
var errBreakerOpen = errors.New("redisstore: circuit breaker open")

// run makes one call of op for c through its node's breaker, with the
// store's deadline, from the caller's goroutine.
func (s *Store) run(ctx context.Context, o op, c *check) ([]result, error) {
	n := s.nodeOf(c)
	ok, trial := n.allow()
	if !ok {
		return nil, errBreakerOpen
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	s.calls.Add(1)
	res, err := s.call(cctx, o, []*check{c})
	cancel()
	if err != nil && isTryAgain(err) {
		// A slot still migrating says nothing about Redis's health; the
		// check falls back by policy.
		n.done(abandoned, trial, err)
		s.failures.Add(1)
		s.lastErr.Store(&err)
		return nil, err
	}
	s.record(ctx, n, trial, err)
	if err != nil {
		return nil, err
	}
	if o != opCheck {
		return nil, nil
	}
	return res[0], nil
}

// call makes one script call of op for cs, whose keys share a slot on a
// Cluster, trying it again while a Cluster slot migrates, within ctx's
// deadline; for a check it returns each one's results.
func (s *Store) call(ctx context.Context, o op, cs []*check) ([][]result, error) {
	if err := ctx.Err(); err != nil {
		// The client would not send it either, but it might dial a
		// connection with ctx first, and fail the calls that wait for
		// that connection with ctx's error.
		return nil, wrap(err)
	}
	keys, args := s.encode(o, cs)
	fn := s.lib.check
	switch o {
	case opRefund:
		fn = s.lib.refund
	case opReset:
		fn = s.lib.reset
	}
	resp := s.exec(ctx, fn, keys, args)
	for try := 0; tryAgain(resp) && try < 3 && ctx.Err() == nil; try++ {
		// A Cluster slot is migrating and some of the call's keys have
		// moved while others have not: the script did not run. Try again
		// shortly, within the deadline.
		time.Sleep(time.Duration(try+1) * 200 * time.Microsecond)
		resp = s.exec(ctx, fn, keys, args)
	}
	b, err := resp.ToString()
	if err != nil {
		return nil, wrap(err)
	}
	if o != opCheck {
		return nil, nil
	}
	return decodeReply(cs, b)
}

// record counts the outcome of a call to n whose caller's context is
// ctx, and tells n's breaker.
func (s *Store) record(ctx context.Context, n *node, trial bool, err error) {
	o := classify(ctx, err)
	switch o {
	case failed:
		s.failures.Add(1)
		s.lastErr.Store(&err)
	case timedOut:
		s.slow.Add(1)
		s.lastErr.Store(&err)
	}
	n.done(o, trial, err)
}

// classify tells what err, a call's error, says of its node: a caller
// that canceled says nothing; a deadline that passed (the store's or the
// caller's) without a reply makes the call slow; any other error is a
// failure.
func classify(ctx context.Context, err error) outcome {
	switch {
	case err == nil:
		return succeeded
	case errors.Is(err, context.DeadlineExceeded):
		return timedOut
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		return abandoned
	}
	return failed
}

func tryAgain(resp rueidis.RedisResult) bool {
	e, ok := rueidis.IsRedisErr(resp.Error())
	return ok && e.IsTryAgain()
}

func isTryAgain(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && re.IsTryAgain()
}

func wrap(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &timeoutError{err}
	}
	return &storeError{err}
}

type storeError struct{ err error }

func (e *storeError) Error() string { return "redisstore: " + e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

type timeoutError struct{ err error }

func (e *timeoutError) Error() string { return "redisstore: deadline exceeded: " + e.err.Error() }
func (e *timeoutError) Unwrap() error { return e.err }

// merge reports the binding limit, the one with the least remaining (ties
// to the longer retry, then the longer reset), with the longest retry and
// delay of all, as the in-memory store does.
func merge(rs []result, allowed bool) bouncer.Decision {
	var d bouncer.Decision
	b := -1
	for i := range rs {
		r := &rs[i]
		d.RetryAfter = max(d.RetryAfter, retryOf(r.retry))
		d.Delay = max(d.Delay, r.delay)
		if b < 0 {
			b = i
			continue
		}
		c := &rs[b]
		if r.remaining < c.remaining ||
			r.remaining == c.remaining && (retryOf(r.retry) > retryOf(c.retry) ||
				r.retry == c.retry && r.reset > c.reset) {
			b = i
		}
	}
	p := &rs[b]
	d.Allowed = allowed
	d.Limit = p.ref.limit.Capacity()
	d.Remaining = p.remaining
	d.ResetAfter = p.reset
	d.Key = p.ref.key
	d.LimitName = p.ref.limit.Name
	if allowed {
		d.RetryAfter = 0
	} else {
		d.Delay = 0
	}
	return d
}

func retryOf(retry time.Duration) time.Duration {
	if retry < 0 {
		return bouncer.Never
	}
	return retry
}
