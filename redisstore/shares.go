package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// Async shares (store.Sharer). A pair's shares are one Redis hash, the
// pair's shares key: its one-word state hash's name (hashKey), then
// ":shares:" and the key's field in hex. It has the prefix, the limit's
// id and the hash tag of the pair's state, so it is as bounded as the
// state's keys, and in its slot. Its fields are the instances; its values
// "<until> <demand> <allowance> <window> <used> <at> <region>", until the
// share's expiry in Unix µs on Redis's clock (lua/shares.lua).

var _ store.Sharer = (*Store)(nil)

// maxShareTTL bounds a share's TTL in µs, so that an expiry stays below
// 2⁵³ in the library's doubles: 2⁵² µs is over 142 years.
const maxShareTTL = 1 << 52

// sharesCall is one call of the shares function, or of the sync
// function: the pairs of one group (all of them on a standalone server).
type sharesCall struct {
	group      int
	pairs      []int // their indexes in the exchange, or the sync's shares
	keys, args []string
	node       *nodeCall // set by allowShares
	// A sync's: its pushes, and their indexes in the sync.
	pushes []*part
	at     []int
}

// ExchangeShares implements store.Sharer. An exchange is one round trip:
// one call of the library's shares function per group of its pairs'
// keys, pipelined (one call on a standalone server; on a Cluster, at most
// Groups, each to its slot's master), within the store's Timeout. It
// counts as one call in Health's Calls, and as one in the Calls of each
// node it reaches. It answers to the breakers of those nodes: while one
// of them is open, it fails at once, without calling Redis; its outcome
// counts towards their health as a check's does. It fails as a whole when
// a call fails, though the calls that succeeded have recorded their
// shares. Shares expire on Redis's clock.
func (s *Store) ExchangeShares(ctx context.Context, ttl time.Duration, pairs []bouncer.Request, mine []store.Share) ([][]store.Share, error) {
	if err := store.ValidateShares(pairs, mine); err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return [][]store.Share{}, nil
	}
	calls, rs, err := s.sharesRound(ctx, s.lib.shares, func() ([]sharesCall, error) { return s.planShares(ttl, pairs, mine) })
	if err != nil {
		return nil, err
	}
	return decodeShares(len(pairs), calls, rs, 0)
}

// sharesRound makes the calls of fn that plan gives, once connected and
// if ctx is not done, through the breakers of the nodes they go to.
func (s *Store) sharesRound(ctx context.Context, fn string, plan func() ([]sharesCall, error)) ([]sharesCall, []rueidis.RedisResult, error) {
	if !s.ready.Load() {
		return nil, nil, s.errConnecting()
	}
	calls, err := plan()
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, wrap(err)
	}
	nodes, err := s.allowShares(calls)
	if err != nil {
		return nil, nil, err
	}
	rs, err := s.callShares(ctx, fn, calls, nodes)
	return calls, rs, err
}

// callShares makes calls of fn, to nodes, within the store's Timeout,
// and counts their outcomes towards the nodes' health.
func (s *Store) callShares(ctx context.Context, fn string, calls []sharesCall, nodes []*nodeCall) ([]rueidis.RedisResult, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.calls.Add(1)
	rs := s.doShares(cctx, fn, calls)
	for i := range calls {
		if n := calls[i].node; n.err == nil {
			n.err = rs[i].Error()
		}
	}
	var err error
	for _, n := range nodes {
		s.finish(ctx, n.b, n.trial, n.err)
		if n.err != nil {
			err = wrap(n.err)
		}
	}
	return rs, err
}

// SyncShares implements store.Sharer: one call of the library's sync
// function per group of the pushes' keys, pipelined, each the pushes of
// its group as a check call has them, then the exchange of their shares
// (one call on a standalone server), within the store's Timeout. It
// counts as one call in Health's Calls, and answers to breakers, as
// ExchangeShares does.
func (s *Store) SyncShares(ctx context.Context, ttl time.Duration, pushes []bouncer.Request, ds []bouncer.Decision, shares []store.SyncShare) ([][]store.Share, error) {
	if err := store.ValidateSync(pushes, ds, shares); err != nil {
		return nil, err
	}
	if len(pushes) == 0 {
		return [][]store.Share{}, nil
	}
	calls, rs, err := s.sharesRound(ctx, s.lib.sync, func() ([]sharesCall, error) { return s.planSync(ttl, pushes, shares) })
	if err != nil {
		return nil, err
	}
	for i := range calls {
		c := &calls[i]
		flat, err := rs[i].ToArray()
		if err != nil || len(flat) != 1+len(c.pairs) {
			return nil, fmt.Errorf("%w: sync: %d replies for %d shares (%v)", errMalformed, len(flat), len(c.pairs), err)
		}
		b, err := flat[0].ToString()
		if err != nil {
			return nil, fmt.Errorf("%w: sync: %v", errMalformed, err)
		}
		res, err := decodeReply(c.pushes, b)
		if err != nil {
			return nil, err
		}
		for k, i := range c.at {
			ds[i] = merge(res[k], c.pushes[k].allowed)
		}
	}
	return decodeShares(len(shares), calls, rs, 1)
}

// planSync validates the pushes' limits and makes the sync's calls: per
// group, its pushes' check arguments, then the shares' keys and
// arguments (lua/sync.lua).
func (s *Store) planSync(ttl time.Duration, pushes []bouncer.Request, shares []store.SyncShare) ([]sharesCall, error) {
	var calls []sharesCall
	callOf := make([]int, len(pushes))
	for i, r := range pushes {
		ps, err := s.plan(r)
		if err != nil {
			return nil, err
		}
		p := &ps[0]
		ci := 0
		for ci < len(calls) && calls[ci].group != p.group {
			ci++
		}
		if ci == len(calls) {
			calls = append(calls, sharesCall{group: p.group})
		}
		callOf[i] = ci
		calls[ci].pushes, calls[ci].at = append(calls[ci].pushes, p), append(calls[ci].at, i)
	}
	for i := range calls {
		c := &calls[i]
		c.keys, c.args = s.encode(opCheck, c.pushes)
		c.args = append(c.args, strconv.FormatInt(shareTTLµs(ttl), 10), strconv.Itoa(store.MaxShareInstances))
	}
	for j, x := range shares {
		c := &calls[callOf[x.Pair]]
		k := pushes[x.Pair].Keys[0]
		li := s.info(&k.Limits[0])
		c.keys = append(c.keys, s.sharesKey(li.id, digestOf(k.Key, s.buckets)))
		c.pairs = append(c.pairs, j)
		c.args = append(c.args, strconv.Itoa(len(c.keys)), x.Share.Instance, encodeShare(x.Share))
	}
	return calls, nil
}

// shareTTLµs is a share's TTL in whole µs, rounded up, at most
// maxShareTTL; 0 if ttl is not above 0.
func shareTTLµs(ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return min((int64(ttl)+999)/1000, maxShareTTL)
}

// planShares validates the pairs' limits and makes the exchange's calls.
func (s *Store) planShares(ttl time.Duration, pairs []bouncer.Request, mine []store.Share) ([]sharesCall, error) {
	us := shareTTLµs(ttl)
	var pinned string
	if s.now != nil {
		pinned = strconv.FormatInt(s.now().UnixNano(), 10)
	}
	head := []string{pinned, strconv.FormatInt(us, 10), strconv.Itoa(store.MaxShareInstances)}
	var calls []sharesCall
	for i, r := range pairs {
		k := r.Keys[0]
		li := s.info(&k.Limits[0])
		if li.err != nil {
			return nil, li.err
		}
		d := digestOf(k.Key, s.buckets)
		g := 0
		if s.cluster {
			g = s.groupOf(d.bucket)
		}
		ci := 0
		for ci < len(calls) && calls[ci].group != g {
			ci++
		}
		if ci == len(calls) {
			calls = append(calls, sharesCall{group: g, args: append([]string(nil), head...)})
		}
		c := &calls[ci]
		c.pairs = append(c.pairs, i)
		c.keys = append(c.keys, s.sharesKey(li.id, d))
		c.args = append(c.args, mine[i].Instance, encodeShare(mine[i]))
	}
	return calls, nil
}

// sharesKey is the hash of a pair's shares.
func (s *Store) sharesKey(lid string, d digest) string {
	var a [160]byte
	b := s.appendHashKey(a[:0], lid, d.bucket)
	b = append(b, ":shares:"...)
	b = hex.AppendEncode(b, d.field[:])
	return string(b)
}

// nodeCall is what an exchange asks of one node's breaker, and the error
// of its calls to that node.
type nodeCall struct {
	b     *breaker
	trial bool
	err   error
}

// allowShares asks the breakers of the nodes the calls go to, once a
// node; when one of them refuses, it returns errBreakerOpen and lets the
// others go.
func (s *Store) allowShares(calls []sharesCall) ([]*nodeCall, error) {
	var nodes []*nodeCall
	for i := range calls {
		b := s.breakerOf(&part{group: calls[i].group})
		for _, n := range nodes {
			if n.b == b {
				calls[i].node = n
			}
		}
		if calls[i].node != nil {
			continue
		}
		ok, trial := b.allow()
		if !ok {
			for _, n := range nodes {
				n.b.done(abandoned, n.trial, nil)
			}
			return nil, errBreakerOpen
		}
		calls[i].node = &nodeCall{b: b, trial: trial}
		nodes = append(nodes, calls[i].node)
	}
	return nodes, nil
}

// doShares makes the calls in one pipeline, through guarded; it loads
// the library on the nodes that miss it.
func (s *Store) doShares(ctx context.Context, fn string, calls []sharesCall) []rueidis.RedisResult {
	return guarded(s, ctx, func() []rueidis.RedisResult {
		cmds := make(rueidis.Commands, len(calls))
		for i := range calls {
			cmds[i] = fcallCmd(s.client, fn, calls[i].keys, calls[i].args)
		}
		rs := s.client.DoMulti(ctx, cmds...)
		for i := range rs {
			if missingFunction(rs[i]) {
				s.lib.load(ctx, s.client)
				rs[i] = fcall(ctx, s.client, fn, calls[i].keys, calls[i].args)
			}
			s.noteTrouble(ctx, rs[i])
		}
		return rs
	}, func(err error) []rueidis.RedisResult {
		rs := make([]rueidis.RedisResult, len(calls))
		for i := range rs {
			rs[i] = rueidis.NewErrorResult(err)
		}
		return rs
	})
}

// encodeShare is a share's value without its expiry.
func encodeShare(sh store.Share) string {
	b := strconv.AppendFloat(make([]byte, 0, 64+len(sh.Region)), sh.Demand, 'g', -1, 64)
	for _, n := range []int64{sh.Allowance, sh.Window, sh.Used, sh.At} {
		b = append(b, ' ')
		b = strconv.AppendInt(b, n, 10)
	}
	b = append(b, ' ')
	return string(append(b, sh.Region...))
}

// decodeShares reads the calls' replies, from their element skip on,
// into the others' shares of each of n pairs.
func decodeShares(n int, calls []sharesCall, rs []rueidis.RedisResult, skip int) ([][]store.Share, error) {
	others := make([][]store.Share, n)
	for i := range calls {
		perKey, err := rs[i].ToArray()
		if err != nil || len(perKey) != skip+len(calls[i].pairs) {
			return nil, fmt.Errorf("%w: shares: %d lists for %d pairs (%v)", errMalformed, len(perKey)-skip, len(calls[i].pairs), err)
		}
		for j, p := range calls[i].pairs {
			flat, err := perKey[skip+j].AsStrSlice()
			if err != nil || len(flat)%2 != 0 {
				return nil, fmt.Errorf("%w: shares: %v", errMalformed, err)
			}
			for f := 0; f < len(flat); f += 2 {
				sh, err := decodeShare(flat[f], flat[f+1])
				if err != nil {
					return nil, err
				}
				others[p] = append(others[p], sh)
			}
		}
	}
	return others, nil
}

// decodeShare reads a stored value, "<until> <demand> <allowance>
// <window> <used> <at> <region>", of instance inst. The region is last,
// and may hold spaces.
func decodeShare(inst, v string) (store.Share, error) {
	w := strings.SplitN(v, " ", 7)
	if len(w) != 7 {
		return store.Share{}, fmt.Errorf("%w: share %q of %q", errMalformed, v, inst)
	}
	d, err := strconv.ParseFloat(w[1], 64)
	var n [4]int64
	for k := range n {
		var e error
		n[k], e = strconv.ParseInt(w[2+k], 10, 64)
		err = errors.Join(err, e)
	}
	if err != nil {
		return store.Share{}, fmt.Errorf("%w: share %q of %q", errMalformed, v, inst)
	}
	return store.Share{Instance: inst, Demand: d, Allowance: n[0], Window: n[1], Used: n[2], At: n[3], Region: w[6]}, nil
}
