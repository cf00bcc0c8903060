package rules

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bouncerhq/bouncer"
)

// KeyIndex remembers the keys an engine decided most recently, up to a
// bound, so that an operator can list them, look at their state and reset
// them. Stores keep hashes or digests of keys, never the keys (that is how
// they stay small and safe with client-controlled values), so this index
// is where keys can be listed from. It is safe for concurrent use.
type KeyIndex struct {
	max int

	mu    sync.Mutex
	keys  map[string]*KeyInfo
	order []string // ring of keys in the order they were first seen
	next  int      // the ring's oldest entry once full
}

// KeyInfo is what the index knows of one key.
type KeyInfo struct {
	Key      string
	Domain   string
	Rule     *Rule
	Entries  []Entry         // the descriptor, as matched (client IPs aggregated, plan left out)
	Limits   []bouncer.Limit // the limits the key was last checked under
	LastSeen time.Time
	Denied   uint64 // requests answered over the limit since the index first held the key

	// Judge, with envoy semantics, is the limit whose rate judged the
	// key's count last: the rule's, or with a nil Rule the override the
	// request set. Limits then holds the limit the count is kept under,
	// one per unit whatever the rate (see State). It is nil otherwise.
	Judge *CurrentLimit
}

// NewKeyIndex returns an index of at most n keys (at least 1); past it,
// the key first seen longest ago is forgotten.
func NewKeyIndex(n int) *KeyIndex {
	n = max(n, 1)
	return &KeyIndex{max: n, keys: make(map[string]*KeyInfo, min(n, 1<<16))}
}

// note records the counted keys of one request, decided now.
func (x *KeyIndex) note(domain string, ms []*matched, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, m := range ms {
		if !m.counted() {
			continue
		}
		if k, ok := x.keys[m.key]; ok {
			k.LastSeen, k.Rule, k.Limits, k.Judge = now, m.rule, m.limits, judgeOf(m, k.Judge)
			continue
		}
		k := &KeyInfo{Key: m.key, Domain: domain, Rule: m.rule, Entries: shorten(m.entries), Limits: m.limits, LastSeen: now, Judge: judgeOf(m, nil)}
		if len(x.order) < x.max {
			x.order = append(x.order, m.key)
		} else {
			delete(x.keys, x.order[x.next])
			x.order[x.next] = m.key
			x.next = (x.next + 1) % x.max
		}
		x.keys[m.key] = k
	}
}

// judgeOf is KeyInfo.Judge for m: was, the one the index holds, when m
// judges by the same limit again (copies of a KeyInfo share it, so it is
// never changed in place), else a new one, or nil.
func judgeOf(m *matched, was *CurrentLimit) *CurrentLimit {
	if !m.shared {
		return nil
	}
	o := m.report
	if was != nil && *was == o {
		return was
	}
	p := new(CurrentLimit)
	*p = o
	return p
}

// noteDenied counts, for each descriptor of resp over its limit, a
// denial of its key.
func (x *KeyIndex) noteDenied(resp *Response) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range resp.Statuses {
		st := &resp.Statuses[i]
		if st.Code != OverLimit || st.Key == "" {
			continue
		}
		if k, ok := x.keys[st.Key]; ok {
			k.Denied++
		}
	}
}

// MostDenied returns up to n keys with the most denials, most first
// (ties to the key seen last); keys never denied are left out.
func (x *KeyIndex) MostDenied(n int) []KeyInfo {
	x.mu.Lock()
	var out []KeyInfo
	for _, k := range x.keys {
		if k.Denied > 0 {
			out = append(out, *k)
		}
	}
	x.mu.Unlock()
	slices.SortFunc(out, func(a, b KeyInfo) int {
		if a.Denied != b.Denied {
			return cmp.Compare(b.Denied, a.Denied)
		}
		return b.LastSeen.Compare(a.LastSeen)
	})
	return out[:min(n, len(out))]
}

// maxShownValue bounds the entry values the index keeps: they come from
// clients, and ten thousand keys of 32 entries of 4 KiB would hold over a
// gigabyte. The key itself is bounded (bouncer.KeyOf) and stays exact.
const maxShownValue = 64

// shorten copies entries for the index, cutting long values to
// maxShownValue bytes followed by "…".
func shorten(entries []Entry) []Entry {
	out := slices.Clone(entries)
	for i, e := range out {
		if len(e.Value) > maxShownValue {
			out[i].Value = strings.ToValidUTF8(e.Value[:maxShownValue], "") + "…"
		}
		if len(e.Key) > maxShownValue {
			out[i].Key = strings.ToValidUTF8(e.Key[:maxShownValue], "") + "…"
		}
	}
	return out
}

// Get returns what the index knows of key.
func (x *KeyIndex) Get(key string) (KeyInfo, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	k, ok := x.keys[key]
	if !ok {
		return KeyInfo{}, false
	}
	return *k, true
}

// List returns up to n keys that sort after after (all keys when after is
// ""), in key order, and whether more follow.
func (x *KeyIndex) List(after string, n int) ([]KeyInfo, bool) {
	x.mu.Lock()
	keys := make([]string, 0, len(x.keys))
	for k := range x.keys {
		if k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	more := len(keys) > n
	keys = keys[:min(n, len(keys))]
	out := make([]KeyInfo, len(keys))
	for i, k := range keys {
		out[i] = *x.keys[k]
	}
	x.mu.Unlock()
	return out, more
}

// Len returns how many keys the index holds.
func (x *KeyIndex) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.keys)
}

// LimitState is one limit's state for a key, as a peek sees it.
type LimitState struct {
	Limit      bouncer.Limit
	Allowed    bool // whether a peek passes: false once a charge_denied window is over
	Remaining  int64
	ResetAfter time.Duration

	// RetryAfter is how long until a request of cost 1 would pass: 0 when
	// one would now, bouncer.Never when none ever can, and 0 also for a
	// full concurrency limit, which frees a unit when a request ends.
	RetryAfter time.Duration
}

// State peeks at every limit of k.Limits for k.Key, each on its own, so
// that each reports its own remaining and reset. It charges nothing:
// where a peek finds no unit left, it learns RetryAfter from the window's
// reset (a fixed window) or from a check of cost 1, which a limit without
// charge_denied does not charge when it denies (and which is refunded
// should a unit have come free in between). For a key last checked under
// a shared count (k.Judge), the state is the count judged against the
// judging limit's rate, as the next such request would be.
func (e *Engine) State(ctx context.Context, k KeyInfo) ([]LimitState, error) {
	out := make([]LimitState, len(k.Limits))
	for i, l := range k.Limits {
		r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: k.Key, Limits: []bouncer.Limit{l}}}, Peek: true}
		peek, err := e.limiter().Check(ctx, r)
		if err != nil {
			return nil, err
		}
		if o := k.Judge; o != nil {
			m := matched{shared: true, report: *o, limits: k.Limits[i : i+1]}
			peek = m.judge(peek)
			l = bouncer.Limit{Name: limitName(o.Name, o.Unit), Algorithm: l.Algorithm, Rate: int64(o.RequestsPerUnit), Period: l.Period, ChargeDenied: l.ChargeDenied}
		}
		s := LimitState{Limit: l, Allowed: peek.Allowed, Remaining: peek.Remaining, ResetAfter: peek.ResetAfter, RetryAfter: peek.RetryAfter}
		if s.Allowed && s.Remaining < 1 && s.RetryAfter == 0 {
			if s.RetryAfter, err = e.retryAfter(ctx, r, peek); err != nil {
				return nil, err
			}
		}
		out[i] = s
	}
	return out, nil
}

// retryAfter is how long until a request of cost 1 passes r's one limit,
// which a peek found with no unit left.
func (e *Engine) retryAfter(ctx context.Context, r bouncer.Request, peek bouncer.Decision) (time.Duration, error) {
	switch l := r.Keys[0].Limits[0]; {
	case l.Algorithm == bouncer.FixedWindow:
		return peek.ResetAfter, nil
	case l.ChargeDenied, l.Algorithm == bouncer.Concurrency:
		// A denied check would be charged; a refund of a lease would
		// release another request's.
		return 0, nil
	}
	r.Peek, r.Cost = false, 1
	d, err := e.limiter().Check(ctx, r)
	if err != nil {
		return 0, err
	}
	if d.Allowed {
		return 0, e.limiter().Refund(context.WithoutCancel(ctx), r)
	}
	return d.RetryAfter, nil
}

// AllLimits returns the sets of limits k may have been counted under, each set
// once: those it was last checked under, and its rule's own and every
// plan's, since a key of a rule with plans is counted under the plan of
// each request.
func (k KeyInfo) AllLimits() [][]bouncer.Limit {
	var sets [][]bouncer.Limit
	add := func(ls []bouncer.Limit) {
		if len(ls) > 0 && !slices.ContainsFunc(sets, func(s []bouncer.Limit) bool { return slices.Equal(s, ls) }) {
			sets = append(sets, ls)
		}
	}
	add(k.Limits)
	if k.Rule != nil {
		add(k.Rule.Limits)
		for _, name := range slices.Sorted(maps.Keys(k.Rule.Plans)) {
			add(k.Rule.Plans[name].Limits)
		}
	}
	return sets
}

// Reset forgets k's state under every limit it may have been counted
// under (KeyInfo.AllLimits), so that it starts fresh: one reset of the
// store (bouncer.Reset) naming the key once per set of limits, since the
// sets may share limit names (a plan's per_day and the rule's). The store
// must be a bouncer.Resetter.
func (e *Engine) Reset(ctx context.Context, k KeyInfo) error {
	var r bouncer.Request
	for _, ls := range k.AllLimits() {
		r.Keys = append(r.Keys, bouncer.KeyLimits{Key: k.Key, Limits: ls})
	}
	if len(r.Keys) == 0 {
		return nil
	}
	return bouncer.Reset(ctx, e.limiter(), r)
}

// Resolve finds the key and limits that a descriptor of domain is counted
// under, as Decide would match it: for looking a key up by its
// descriptor when the index has forgotten it.
func (e *Engine) Resolve(domain string, entries []Entry) (KeyInfo, error) {
	d := e.Config().Domain(domain)
	if d == nil {
		return KeyInfo{}, fmt.Errorf("%w: %q", ErrUnknownDomain, domain)
	}
	r := Request{Domain: domain, Descriptors: []Descriptor{{Entries: entries}}}
	if err := r.validate(); err != nil {
		return KeyInfo{}, err
	}
	var m matched
	values := make([]string, MaxEntries)
	if !d.match(&r, 0, r.Descriptors[0], values, &m) || m.unlimited || len(m.limits) == 0 {
		return KeyInfo{}, fmt.Errorf("%w: no limited rule matches %s", ErrInvalidRequest, describeEntries(entries))
	}
	return KeyInfo{Key: m.key, Domain: domain, Rule: m.rule, Entries: entries, Limits: m.limits, Judge: judgeOf(&m, nil)}, nil
}

func describeEntries(entries []Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = e.Key + "=" + e.Value
	}
	return strings.Join(parts, ",")
}
