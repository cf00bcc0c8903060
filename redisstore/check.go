package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// ref is one limit of one key of a request, as a script call names it.
type ref struct {
	key   string // the request's key
	limit *bouncer.Limit
	info  *limitInfo
	rkey  string  // its Redis key: the bucket's hash, or the log's set
	field [8]byte // its field in the hash
}

// part is what one script call decides of one request: the limits of the
// request's keys that share a group (on a Cluster: a slot), or all of
// them on a standalone server. A script call decides one part, or a batch
// of parts of different requests of one lane.
type part struct {
	refs    []ref
	cost    int64
	flag    byte // 1: decided as denied elsewhere; flagCharge: a charge (see lua/check.lua)
	group   int
	breaker *breaker // the one it answers to (breakerOf)
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
	ps, err := s.plan(r)
	if err != nil {
		return bouncer.Decision{}, err
	}
	if len(ps) == 1 {
		res, err := s.send(ctx, &ps[0])
		if err != nil {
			return s.fallback(ctx, r, err)
		}
		return merge(res, ps[0].allowed), nil
	}
	return s.checkInTurn(ctx, r, ps)
}

// send decides p, a request's one part: batched in its lane while its
// breaker is closed, else alone through the breaker (which refuses it, or
// lets it through as a trial).
func (s *Store) send(ctx context.Context, p *part) ([]result, error) {
	if s.breakerOf(p).open.Load() {
		return s.sendAlone(ctx, opCheck, p)
	}
	return s.submit(ctx, p)
}

// checkInTurn decides a request whose keys fall in several groups of a
// Cluster: a call per group, in turn. When a call denies, the calls
// before it are refunded (but for their limits that charge denied
// checks, which keep the charge), and the calls after it charge only
// those limits; when one fails, the calls before it are refunded and the
// request decides by policy.
func (s *Store) checkInTurn(ctx context.Context, r bouncer.Request, ps []part) (bouncer.Decision, error) {
	var all []result
	for i := range ps {
		res, err := s.sendAlone(ctx, opCheck, &ps[i])
		if err != nil {
			s.refundAll(ctx, ps[:i], func(*ref) bool { return true })
			return s.fallback(ctx, r, err)
		}
		all = append(all, res...)
		if !ps[i].allowed {
			if r.Cost > 0 {
				s.refundAll(ctx, ps[:i], func(rf *ref) bool { return !rf.limit.ChargeDenied })
				for j := i + 1; j < len(ps); j++ {
					p := ps[j]
					p.refs, p.flag = nil, 1
					for _, rf := range ps[j].refs {
						if rf.limit.ChargeDenied {
							p.refs = append(p.refs, rf)
						}
					}
					if len(p.refs) > 0 {
						s.sendAlone(ctx, opCheck, &p)
					}
				}
			}
			return merge(all, false), nil
		}
	}
	return merge(all, true), nil
}

// refundAll gives the cost of ps back to the limits keep selects, best
// effort, whether or not the caller still waits: a caller that canceled
// between its calls is owed the refund all the same.
func (s *Store) refundAll(ctx context.Context, ps []part, keep func(*ref) bool) {
	ctx = context.WithoutCancel(ctx)
	for i := range ps {
		p := ps[i]
		if p.cost <= 0 {
			continue
		}
		p.refs = nil
		for _, rf := range ps[i].refs {
			if keep(&rf) {
				p.refs = append(p.refs, rf)
			}
		}
		if len(p.refs) > 0 {
			s.sendAlone(ctx, opRefund, &p)
		}
	}
}

var _ store.EachLimiter = (*Store)(nil)

// CheckEach decides each of rs on its own, as Check would; see
// store.EachLimiter. The requests of one part each are submitted
// together, so that those of one group go out in the same script call.
func (s *Store) CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error) {
	if !s.ready.Load() || len(rs) == 1 {
		for i := range rs {
			ds[i], errs[i] = s.Check(ctx, rs[i])
		}
		return
	}
	var pbuf [8]*part
	var ibuf [8]int
	ps, idx := pbuf[:0], ibuf[:0]
	for i, r := range rs {
		planned, err := s.plan(r)
		switch {
		case err != nil:
			ds[i], errs[i] = bouncer.Decision{}, err
		case len(planned) == 1 && !s.breakerOf(&planned[0]).open.Load():
			ps, idx = append(ps, &planned[0]), append(idx, i)
		default:
			ds[i], errs[i] = s.Check(ctx, r)
		}
	}
	if len(ps) == 0 {
		return
	}
	res, cerrs := s.submitEach(ctx, ps)
	for k, i := range idx {
		if cerrs[k] != nil {
			ds[i], errs[i] = s.fallback(ctx, rs[i], cerrs[k])
			continue
		}
		ds[i], errs[i] = merge(res[k], ps[k].allowed), nil
	}
}

// Refund gives r.Cost back to every limit of every key in r; see
// bouncer.Limiter. Refunds are not retried: a refund that fails is lost
// and returned as an error.
func (s *Store) Refund(ctx context.Context, r bouncer.Request) error {
	return s.apply(ctx, opRefund, r)
}

var _ store.Resetter = (*Store)(nil)

// Reset forgets the state of every limit of every key in r, as if they
// had never been checked; see store.Resetter. It fails, changing nothing
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
	ps, err := s.plan(r)
	if err != nil {
		return err
	}
	var errs []error
	for i := range ps {
		if _, err := s.sendAlone(ctx, o, &ps[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validate reports what plan would reject in r, without Redis.
func (s *Store) validate(r bouncer.Request) error {
	if err := store.Validate(r); err != nil {
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

// plan validates r and splits it in parts, a script call each: one on a
// standalone server; on a Cluster, one per group its keys fall in (all
// limits of one key share a group).
func (s *Store) plan(r bouncer.Request) ([]part, error) {
	if err := store.Validate(r); err != nil {
		return nil, err
	}
	n := 0
	for _, k := range r.Keys {
		n += len(k.Limits)
	}
	// The common request, one key under one limit, takes one allocation
	// for its part, its reference and its result.
	var one *onePart
	var ps []part
	if n == 1 {
		one = new(onePart)
		ps = one.part[:0]
	} else {
		ps = make([]part, 0, 1)
	}
	for _, k := range r.Keys {
		d := digestOf(k.Key, s.buckets)
		ci := 0
		switch {
		case s.cluster:
			g := s.groupOf(d.bucket)
			ci = -1
			for i := range ps {
				if ps[i].group == g {
					ci = i
					break
				}
			}
			if ci < 0 {
				ps = append(ps, part{cost: r.Cost, group: g})
				ci = len(ps) - 1
			}
		case len(ps) == 0:
			ps = append(ps, part{cost: r.Cost})
		}
		p := &ps[ci]
		switch {
		case one != nil:
			p.refs, p.res = one.ref[:0], one.res[:0]
		case p.refs == nil:
			p.refs = make([]ref, 0, n)
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
			p.refs = append(p.refs, rf)
		}
	}
	return ps, nil
}

// onePart is the part of a request of one key under one limit, with its
// reference and result.
type onePart struct {
	part [1]part
	ref  [1]ref
	res  [1]result
}

// errBreakerOpen is the error of a call the breaker kept from Redis.
var errBreakerOpen = errors.New("redisstore: circuit breaker open")

// sendAlone makes one script call of op for p alone, not batched: through
// its breaker, with the store's deadline, from the caller's goroutine.
func (s *Store) sendAlone(ctx context.Context, o op, p *part) ([]result, error) {
	b := s.breakerOf(p)
	ok, trial := b.allow()
	if !ok {
		return nil, errBreakerOpen
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	s.calls.Add(1)
	res, err := s.script(cctx, o, []*part{p})
	cancel()
	s.finish(ctx, b, trial, err)
	if err != nil {
		return nil, err
	}
	if o != opCheck {
		return nil, nil
	}
	return res[0], nil
}

// script makes one script call of op for ps, whose keys share a slot on
// a Cluster, through guard, trying it again while a Cluster slot
// migrates, within ctx's deadline; for a check it returns each part's
// results.
func (s *Store) script(ctx context.Context, o op, ps []*part) ([][]result, error) {
	if err := ctx.Err(); err != nil {
		// The client would not send it either, but it might dial a
		// connection with ctx first, and fail the calls that wait for
		// that connection with ctx's error.
		return nil, wrap(err)
	}
	keys, args := s.encode(o, ps)
	fn := s.lib.check
	switch o {
	case opRefund:
		fn = s.lib.refund
	case opReset:
		fn = s.lib.reset
	}
	resp := s.guard(ctx, fn, keys, args)
	for try := 0; tryAgain(resp) && try < 3 && ctx.Err() == nil; try++ {
		// A Cluster slot is migrating and some of the call's keys have
		// moved while others have not: the script did not run. Try again
		// shortly, within the deadline.
		time.Sleep(time.Duration(try+1) * 200 * time.Microsecond)
		resp = s.guard(ctx, fn, keys, args)
	}
	b, err := resp.ToString()
	if err != nil {
		return nil, wrap(err)
	}
	if o != opCheck {
		return nil, nil
	}
	return decodeReply(ps, b)
}

// finish counts the outcome of a call to b's node made alone, not
// batched, whose caller's context is ctx.
func (s *Store) finish(ctx context.Context, b *breaker, trial bool, err error) {
	if err != nil && isTryAgain(err) {
		// A slot still migrating says nothing about Redis's health; the
		// caller falls back by policy.
		b.done(abandoned, trial, err)
		s.failures.Add(1)
		s.lastErr.Store(&err)
		return
	}
	s.record(ctx, b, trial, err)
}

// record counts the outcome of a script call whose caller's context is
// ctx, and tells b, its breaker.
func (s *Store) record(ctx context.Context, b *breaker, trial bool, err error) {
	o := classify(ctx, err)
	switch o {
	case succeeded:
		if s.setupErr.Load() != nil {
			s.setupErr.Store(nil) // permissions granted since
		}
	case failed:
		s.failures.Add(1)
		s.lastErr.Store(&err)
	case timedOut:
		s.slow.Add(1)
		s.lastErr.Store(&err)
	}
	b.done(o, trial, err)
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
	d.Capacity = p.ref.limit.Capacity()
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
