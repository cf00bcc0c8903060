package rules

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
)

// KeyObserver is told of the keys of every decision: Engine.Keys. The
// admin API's key index is one (stores keep no keys, only hashes or
// digests, so an index is where keys can be listed from). Its methods are
// called from Decide, on every request and concurrently: they must be
// quick and safe for concurrent use.
type KeyObserver interface {
	// Decided is told of one counted key of a decision, with LastSeen the
	// instant of the decision. k.Entries and k.Judge are the request's,
	// valid during the call: an observer that keeps them copies them (or
	// keeps what it held when they are equal). k.Rule and k.Limits are the
	// config's, never changed, and may be kept.
	Decided(k KeyInfo)

	// Denied is told of one key a decision answered over its limit,
	// after Decided was told of it.
	Denied(key string)
}

// KeyInfo is what the engine knows of one key, for looking at its state
// (State) and resetting it (Reset).
type KeyInfo struct {
	Key      string
	Domain   string
	Rule     *Rule
	Entries  []Entry         // the descriptor, as matched (client IPs aggregated, plan left out)
	Limits   []bouncer.Limit // the limits the key was last checked under
	LastSeen time.Time

	// Judge, with envoy semantics, is the limit whose rate judged the
	// key's count last: the rule's, or with a nil Rule the override the
	// request set. Limits then holds the limit the count is kept under,
	// one per unit whatever the rate (see State). It is nil otherwise.
	Judge *CurrentLimit
}

// observe tells e.Keys of the counted keys of one request, decided now.
func (e *Engine) observe(domain string, ms []*matched, now time.Time) {
	for _, m := range ms {
		if !m.counted() {
			continue
		}
		k := KeyInfo{Key: m.key, Domain: domain, Rule: m.rule, Entries: m.entries, Limits: m.limits, LastSeen: now}
		if m.shared {
			k.Judge = &m.report
		}
		e.Keys.Decided(k)
	}
}

// observeDenied tells e.Keys of each descriptor of resp over its limit.
func (e *Engine) observeDenied(resp *Response) {
	for i := range resp.Statuses {
		if st := &resp.Statuses[i]; st.Code == OverLimit && st.Key != "" {
			e.Keys.Denied(st.Key)
		}
	}
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
// must be a store.Resetter.
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
		return KeyInfo{}, fmt.Errorf("%w: no limited rule matches %s", bouncer.ErrInvalidRequest, describeEntries(entries))
	}
	k := KeyInfo{Key: m.key, Domain: domain, Rule: m.rule, Entries: entries, Limits: m.limits}
	if m.shared {
		judge := m.report
		k.Judge = &judge
	}
	return k, nil
}

func describeEntries(entries []Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = e.Key + "=" + e.Value
	}
	return strings.Join(parts, ",")
}
