package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
)

// call is one script call: the limits of the keys of one bucket (on a
// Cluster) or of the whole request.
type call struct {
	keys   []string
	args   []string
	limits []limitRef
	cost   int64
	res    []result // room for a packed reply's result, if any
	node   *node    // whose breaker it answers to (nodeOf)
}

// limitRef names one limit of one key of the request.
type limitRef struct {
	key   string
	limit *bouncer.Limit
	info  *limitInfo
}

// result is one limit's part of a script's reply.
type result struct {
	ref       limitRef
	allowed   bool
	remaining int64
	reset     int64
	retry     int64 // -1: never
	delay     int64
}

// Check decides r; see bouncer.Limiter. Each script call gets the store's
// Timeout; when Redis cannot answer, every limit decides by its
// StoreErrorPolicy and the decision is marked Degraded.
func (s *Store) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	if !s.ready.Load() {
		if err := s.validate(r); err != nil {
			return bouncer.Decision{}, err
		}
		return s.fallback(ctx, r, s.errConnecting())
	}
	calls, err := s.plan(r, "c")
	if err != nil {
		return bouncer.Decision{}, err
	}
	var results []result
	for i := range calls {
		var res []result
		var allowed bool
		var err error
		if len(calls) == 1 && s.batchable(&calls[0]) && !s.nodeOf(&calls[0]).open.Load() {
			res, allowed, err = s.batch.do(ctx, &calls[0])
		} else {
			res, allowed, err = s.run(ctx, &calls[i])
		}
		if err != nil {
			// Give back what earlier calls charged; then decide by policy.
			s.undo(ctx, r.Cost, calls[:i])
			return s.fallback(ctx, r, err)
		}
		if results == nil {
			results = res
		} else {
			results = append(results, res...)
		}
		if !allowed {
			s.settle(ctx, r.Cost, calls, i)
			return merge(results, false), nil
		}
	}
	return merge(results, true), nil
}

// batchable reports whether c, a request's one call, may go in a batch:
// on a standalone server (or Sentinel) any may; on a Cluster, a check of
// one limit (see slots.go).
func (s *Store) batchable(c *call) bool {
	return s.batch != nil && (!s.cluster || c.packable())
}

var _ bouncer.EachLimiter = (*Store)(nil)

// CheckEach decides each of rs on its own, as Check would; see
// bouncer.EachLimiter. The checks are queued together and go out in the
// same batched script calls; without batching, or on a Cluster when one of
// them cannot be batched (see Store.batchable), they run concurrently, a
// call each.
func (s *Store) CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error) {
	if !s.ready.Load() || s.batch == nil || s.batch.closed.Load() || len(rs) == 1 {
		bouncer.CheckConcurrently(ctx, s, rs, ds, errs)
		return
	}
	var cbuf [8]*call
	var ibuf [8]int
	cs, idx := cbuf[:0], ibuf[:0]
	for i, r := range rs {
		calls, err := s.plan(r, "c")
		if err != nil {
			ds[i], errs[i] = bouncer.Decision{}, err
			continue
		}
		if len(calls) != 1 || !s.batchable(&calls[0]) || s.nodeOf(&calls[0]).open.Load() {
			bouncer.CheckConcurrently(ctx, s, rs, ds, errs)
			return
		}
		cs, idx = append(cs, &calls[0]), append(idx, i)
	}
	var rbuf [8]batchReply
	replies := rbuf[:0]
	if len(cs) > len(rbuf) {
		replies = make([]batchReply, 0, len(cs))
	}
	replies = replies[:len(cs)]
	s.batch.doEach(ctx, cs, replies)
	for k, r := range replies {
		i := idx[k]
		if r.err != nil {
			ds[i], errs[i] = s.fallback(ctx, rs[i], r.err)
			continue
		}
		ds[i], errs[i] = merge(r.res, r.allowed), nil
	}
}

// Refund gives r.Cost back to every limit of every key in r; see
// bouncer.Limiter. Refunds are not retried: a refund that fails is lost
// and returned as an error.
func (s *Store) Refund(ctx context.Context, r bouncer.Request) error {
	if !s.ready.Load() {
		if err := s.validate(r); err != nil {
			return err
		}
		return s.errConnecting()
	}
	calls, err := s.plan(r, "r")
	if err != nil {
		return err
	}
	var errs []error
	for i := range calls {
		if _, _, err := s.run(ctx, &calls[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// undo refunds cost to the limits of calls that were charged, as far as
// Redis lets it; it is best effort.
func (s *Store) undo(ctx context.Context, cost int64, calls []call) {
	if cost <= 0 {
		return
	}
	for i := range calls {
		c := calls[i]
		c.args = append([]string(nil), c.args...)
		c.args[2] = "r"
		s.run(ctx, &c)
	}
}

// settle completes a check of cost that calls[i] denied, calls[:i] having
// allowed and charged it: it refunds calls[:i] their limits without
// ChargeDenied, and charges the limits with ChargeDenied of calls[i+1:],
// which did not run, as a denied check charges them. (calls[i]'s script
// charged its own.) It is best effort, as undo is.
func (s *Store) settle(ctx context.Context, cost int64, calls []call, i int) {
	if cost <= 0 {
		return
	}
	for j := range calls {
		if j == i {
			continue
		}
		mode, charged := "r", false
		if j > i {
			mode, charged = "d", true
		}
		if c, ok := calls[j].part(mode, charged); ok {
			s.run(ctx, &c)
		}
	}
}

// part returns c reduced to its limits whose ChargeDenied is charged, to
// run in mode, or false if it has none.
func (c *call) part(mode string, charged bool) (call, bool) {
	p := call{keys: c.keys, args: append(make([]string, 0, len(c.args)), c.args[:4]...)}
	for k, ref := range c.limits {
		if ref.limit.ChargeDenied == charged {
			p.args = append(p.args, c.args[4+limitArgs*k:4+limitArgs*(k+1)]...)
			p.limits = append(p.limits, ref)
		}
	}
	if len(p.limits) == 0 {
		return call{}, false
	}
	p.args[2], p.args[3] = mode, strconv.Itoa(len(p.limits))
	return p, true
}

// limitArgs is how many arguments describe one limit to the script.
const limitArgs = 10

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

// plan validates r and builds its script calls: one call on a standalone
// server; on a Cluster, one per bucket (all limits of one key share one).
func (s *Store) plan(r bouncer.Request, mode string) ([]call, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var pinned string
	if s.now != nil {
		pinned = strconv.FormatInt(s.now().UnixNano(), 10)
	}
	cost := strconv.FormatInt(r.Cost, 10)
	// The common check, one key under one limit, gets its call, arguments,
	// key and limit in one allocation.
	var one *oneCall
	var calls []call
	if len(r.Keys) == 1 && len(r.Keys[0].Limits) == 1 {
		one = new(oneCall)
		calls = one.call[:0]
	} else {
		calls = make([]call, 0, 1)
	}
	var buckets []uint64 // on a Cluster: the bucket of each call
	for _, k := range r.Keys {
		d := digestOf(k.Key, s.buckets)
		ci := 0
		if s.cluster {
			ci = slices.Index(buckets, d.bucket)
			if ci < 0 {
				ci = len(calls)
				buckets = append(buckets, d.bucket)
				calls = append(calls, call{})
			}
		} else if len(calls) == 0 {
			calls = append(calls, call{})
		}
		c := &calls[ci]
		if c.args == nil {
			n := len(k.Limits)
			if !s.cluster {
				n = limitsOf(r.Keys)
			}
			// The arguments and the keys share one allocation.
			na := 4 + limitArgs*n
			var buf []string
			if one != nil {
				buf, c.limits, c.res = one.strings[:], one.limit[:0], one.res[:0]
			} else {
				buf, c.limits = make([]string, na+n), make([]limitRef, 0, n)
			}
			c.args, c.keys = buf[:4:na], buf[na:na]
			c.args[0], c.args[1], c.args[2] = pinned, cost, mode
			c.cost = r.Cost
		}
		for j := range k.Limits {
			l := &k.Limits[j]
			li := s.info(l)
			if li.err != nil {
				return nil, li.err
			}
			field := ""
			var rk string
			if li.log {
				rk = logKey(s.prefix, li.id, d)
			} else {
				rk, field = hashField(s.prefix, li.id, d)
			}
			ki := indexOf(c.keys, rk)
			if ki < 0 {
				c.keys = append(c.keys, rk)
				ki = len(c.keys) - 1
			}
			c.args = append(c.args, strconv.Itoa(ki+1), field)
			c.args = append(c.args, li.args[:]...)
			c.limits = append(c.limits, limitRef{key: k.Key, limit: l, info: li})
		}
	}
	for i := range calls {
		calls[i].args[3] = strconv.Itoa(len(calls[i].limits))
	}
	return calls, nil
}

// oneCall is the call of a check of one key under one limit, with its
// arguments, key, limit and result.
type oneCall struct {
	call    [1]call
	strings [4 + limitArgs + 1]string
	limit   [1]limitRef
	res     [1]result
}

// limitsOf counts the limits of keys.
func limitsOf(keys []bouncer.KeyLimits) int {
	n := 0
	for _, k := range keys {
		n += len(k.Limits)
	}
	return n
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// errBreakerOpen is the error of a call the breaker kept from Redis.
var errBreakerOpen = errors.New("redisstore: circuit breaker open")

// run makes one script call through its node's breaker, with the store's
// deadline, and parses a check's reply.
func (s *Store) run(ctx context.Context, c *call) ([]result, bool, error) {
	n := s.nodeOf(c)
	ok, trial := n.allow()
	if !ok {
		return nil, false, errBreakerOpen
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	s.calls.Add(1)
	resp := s.call(cctx, c)
	cancel()
	res, allowed, err := parseReply(resp, c)
	if err != nil && tryAgain(resp) {
		// A slot still migrating says nothing about Redis's health; the
		// check falls back by policy.
		n.done(abandoned, trial, err)
		s.failures.Add(1)
		s.lastErr.Store(&err)
		return nil, false, err
	}
	s.record(ctx, n, trial, err)
	if err != nil {
		return nil, false, err
	}
	return res, allowed, nil
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

// call makes c's script call, packed if it can be, and tries it again
// while a Cluster slot migrates, within ctx's deadline.
func (s *Store) call(ctx context.Context, c *call) rueidis.RedisResult {
	x := c
	if c.packable() {
		x = &call{keys: c.keys, args: packedArgs(c.args[0], []*call{c}, false)}
	}
	resp := s.exec(ctx, x)
	for try := 0; tryAgain(resp) && try < 3 && ctx.Err() == nil; try++ {
		// A Cluster slot is migrating and some of the call's keys have
		// moved while others have not: the script did not run. Try again
		// shortly, within the deadline.
		time.Sleep(time.Duration(try+1) * 200 * time.Microsecond)
		resp = s.exec(ctx, x)
	}
	return resp
}

func tryAgain(resp rueidis.RedisResult) bool {
	e, ok := rueidis.IsRedisErr(resp.Error())
	return ok && e.IsTryAgain()
}

func parseReply(resp rueidis.RedisResult, c *call) ([]result, bool, error) {
	if c.args[2] != "c" {
		if err := resp.Error(); err != nil {
			return nil, false, wrap(err)
		}
		return nil, true, nil
	}
	if c.packable() { // sent packed by call, so answered packed
		b, err := resp.ToString()
		if err != nil {
			return nil, false, wrap(err)
		}
		return parsePacked(c, b)
	}
	vals, err := resp.AsIntSlice()
	if err != nil {
		return nil, false, wrap(err)
	}
	return parseVals(c, vals)
}

// parseVals parses a check's part of a script's reply.
func parseVals(c *call, vals []int64) ([]result, bool, error) {
	if len(vals) != 1+5*len(c.limits) {
		return nil, false, errors.New("redisstore: malformed script reply")
	}
	res := make([]result, len(c.limits))
	for i := range res {
		v := vals[1+5*i:]
		res[i] = result{ref: c.limits[i], allowed: v[0] == 1, remaining: v[1], reset: v[2], retry: v[3], delay: v[4]}
	}
	return res, vals[0] == 1, nil
}

// packedReplyLen is the length of one check's reply in a packed batch's
// reply: allowed as a byte, then remaining, reset-after, retry-after and
// delay as little-endian doubles (F.emitPacked in check.lua).
const packedReplyLen = 33

// parsePacked parses the reply b of c, a check of one limit, in a packed
// batch.
func parsePacked(c *call, b string) ([]result, bool, error) {
	if len(b) != packedReplyLen || b[0] > 1 {
		return nil, false, errors.New("redisstore: malformed script reply")
	}
	num := func(i int) int64 {
		s := b[1+8*i : 9+8*i]
		u := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		return int64(math.Float64frombits(u))
	}
	allowed := b[0] == 1
	res := append(c.res[:0], result{ref: c.limits[0], allowed: allowed, remaining: num(0), reset: num(1), retry: num(2), delay: num(3)})
	return res, allowed, nil
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
		d.RetryAfter = max(d.RetryAfter, duration(r.retry))
		d.Delay = max(d.Delay, time.Duration(r.delay))
		if b < 0 {
			b = i
			continue
		}
		c := &rs[b]
		if r.remaining < c.remaining ||
			r.remaining == c.remaining && (duration(r.retry) > duration(c.retry) ||
				r.retry == c.retry && r.reset > c.reset) {
			b = i
		}
	}
	p := &rs[b]
	d.Allowed = allowed
	d.Limit = p.ref.limit.Capacity()
	d.Remaining = p.remaining
	d.ResetAfter = time.Duration(p.reset)
	d.Key = p.ref.key
	d.LimitName = p.ref.limit.Name
	if allowed {
		d.RetryAfter = 0
	} else {
		d.Delay = 0
	}
	return d
}

func duration(retry int64) time.Duration {
	if retry < 0 {
		return bouncer.Never
	}
	return time.Duration(retry)
}

// packable reports whether c can be sent packed (see check.lua): a check
// of one limit.
func (c *call) packable() bool {
	return len(c.limits) == 1 && c.args[2] == "c" && c.limits[0].info != nil
}

// packedArgs returns the arguments of a packed call of the checks cs,
// packable all: the limits they use, each once, then one argument per
// check. The call's keys are those of cs one after another, or, inArgs (a
// Cluster's batch, "P"), they follow as arguments.
func packedArgs(pinned string, cs []*call, inArgs bool) []string {
	var infos [8]*limitInfo
	lis := infos[:0]
	n := 4 + 1 + len(cs)
	mode := "p"
	if inArgs {
		n += len(cs)
		mode = "P"
	}
	args := make([]string, 4, n)
	args[0], args[1], args[2] = pinned, strconv.Itoa(len(cs)), mode
	idx := make([]uint16, len(cs))
	size := 0
	for i, c := range cs {
		li := c.limits[0].info
		j := slices.Index(lis, li)
		if j < 0 {
			lis = append(lis, li)
			args = append(args, li.packed)
			j = len(lis) - 1
		}
		idx[i] = uint16(j + 1)
		size += 12 + len(c.args[5])
	}
	args[3] = strconv.Itoa(len(lis))
	// The checks' arguments share one string.
	buf := make([]byte, 0, size)
	ki := 0
	if inArgs {
		ki = len(args) + len(cs) // the first key's index in ARGV, less one
	}
	for i, c := range cs {
		buf = binary.LittleEndian.AppendUint16(buf, uint16(ki+1)) // the key of a check of one limit is its call's first
		buf = binary.LittleEndian.AppendUint16(buf, idx[i])
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(float64(c.cost)))
		buf = append(buf, c.args[5]...) // the field
		ki += len(c.keys)
	}
	all := string(buf)
	for _, c := range cs {
		n := 12 + len(c.args[5])
		args = append(args, all[:n])
		all = all[n:]
	}
	if inArgs {
		for _, c := range cs {
			args = append(args, c.keys...)
		}
	}
	return args
}
