package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// Bounds bound the rate a key's runtime limits may give one limit of its
// rule (Rule.Overrides): for a priced rule, a budget in micro-units.
type Bounds struct {
	Min, Max int64
}

// Custom is a key's own limits, set at runtime over its rule's: a
// tenant's plan, a custom budget. Rates maps a limit's name to its rate
// (a budget's in micro-units); the limit keeps its rule's algorithm and
// period. By and At say who set it, and when.
type Custom struct {
	Rates map[string]int64 `json:"rates"`
	By    string           `json:"by"`
	At    time.Time        `json:"at"`
}

// ErrNoRecords is the error of runtime limits on a store that keeps no
// records (store.Records). It wraps errors.ErrUnsupported.
var ErrNoRecords = fmt.Errorf("rules: the store keeps no records, where runtime limits live: %w", errors.ErrUnsupported)

// BoundsError is SetLimits's error for a rate the rule does not let a
// key have. It wraps bouncer.ErrInvalidRequest.
type BoundsError struct {
	Limit  string
	Reason string
}

func (e *BoundsError) Error() string { return fmt.Sprintf("limit %q: %s", e.Limit, e.Reason) }

// Unwrap returns bouncer.ErrInvalidRequest.
func (e *BoundsError) Unwrap() error { return bouncer.ErrInvalidRequest }

func customKey(key string) string { return "limits\x00" + key }

func (e *Engine) records() (store.Records, error) {
	r, ok := e.limiter().(store.Records)
	if !ok {
		return nil, ErrNoRecords
	}
	return r, nil
}

// Limits returns the runtime limits of key k, if it has any.
func (e *Engine) Limits(ctx context.Context, k KeyInfo) (Custom, bool, error) {
	recs, err := e.records()
	if err != nil {
		return Custom{}, false, err
	}
	return readCustom(ctx, recs, k.Key)
}

func readCustom(ctx context.Context, recs store.Records, key string) (Custom, bool, error) {
	v, ok, err := recs.GetRecord(ctx, customKey(key))
	if err != nil || !ok {
		return Custom{}, false, err
	}
	var c Custom
	if err := json.Unmarshal(v, &c); err != nil {
		return Custom{}, false, fmt.Errorf("rules: the runtime limits of %q: %w", key, err)
	}
	return c, true, nil
}

// SetLimits gives key k its own rates for limits of its rule, by name,
// replacing any it had, as by (who asks) at the engine's now; every
// instance on the same shared store applies them from its next check.
// Only limits the rule's overrides name may be set, within their bounds
// (a *BoundsError otherwise). What the key has used carries over: each
// limit's new state is charged what its old one had used (its capacity
// less what remains), so a budget raised from 50 to 100 after 45 spent
// has 55 left. It returns the limits the key had before.
func (e *Engine) SetLimits(ctx context.Context, k KeyInfo, rates map[string]int64, by string) (old Custom, had bool, err error) {
	if k.Rule == nil || len(k.Rule.Overrides) == 0 {
		return Custom{}, false, fmt.Errorf("%w: rule %s lets no key have limits of its own (its overrides)", bouncer.ErrInvalidRequest, ruleLabel(k.Rule))
	}
	if len(rates) == 0 {
		return Custom{}, false, fmt.Errorf("%w: no rates to set", bouncer.ErrInvalidRequest)
	}
	for _, name := range slices.Sorted(maps.Keys(rates)) {
		b, ok := k.Rule.Overrides[name]
		switch v := rates[name]; {
		case !ok:
			return Custom{}, false, &BoundsError{name, fmt.Sprintf("rule %s lets a key set %s, not this limit", ruleLabel(k.Rule), overridable(k.Rule))}
		case v < b.Min || v > b.Max:
			return Custom{}, false, &BoundsError{name, fmt.Sprintf("%s is outside the rule's bounds, %s to %s", k.Rule.amount(v), k.Rule.amount(b.Min), k.Rule.amount(b.Max))}
		}
	}
	recs, err := e.records()
	if err != nil {
		return Custom{}, false, err
	}
	if old, had, err = readCustom(ctx, recs, k.Key); err != nil {
		return Custom{}, false, err
	}
	c := Custom{Rates: rates, By: by, At: e.now().UTC()}
	v, err := json.Marshal(c)
	if err != nil {
		return old, had, err
	}
	if err := e.carryOver(ctx, k, old.Rates, rates); err != nil {
		return old, had, err
	}
	return old, had, recs.PutRecord(ctx, customKey(k.Key), v)
}

// DeleteLimits takes key k's runtime limits away: its rule's apply again
// from the next check, with what the key used under its own carried
// over. It returns the limits the key had.
func (e *Engine) DeleteLimits(ctx context.Context, k KeyInfo) (old Custom, had bool, err error) {
	recs, err := e.records()
	if err != nil {
		return Custom{}, false, err
	}
	if old, had, err = readCustom(ctx, recs, k.Key); err != nil || !had {
		return old, had, err
	}
	if err := e.carryOver(ctx, k, old.Rates, nil); err != nil {
		return old, had, err
	}
	return old, had, recs.DeleteRecord(ctx, customKey(k.Key))
}

// carryOver charges each limit of k whose rate changes from the rates
// from to to what the key used under the old rate and not yet under the
// new (a state kept from an earlier change may hold some).
func (e *Engine) carryOver(ctx context.Context, k KeyInfo, from, to map[string]int64) error {
	ch, canCharge := e.limiter().(store.Charger)
	for _, l := range k.Limits {
		before, after := withRate(l, k.Rule, from), withRate(l, k.Rule, to)
		if before == after || !store.Chargeable(l) {
			continue
		}
		used, err := e.used(ctx, k.Key, before)
		if err != nil {
			return err
		}
		usedAfter, err := e.used(ctx, k.Key, after)
		if err != nil {
			return err
		}
		if n := used - usedAfter; n > 0 {
			if !canCharge {
				return fmt.Errorf("rules: %T cannot charge what a key used: %w", e.limiter(), errors.ErrUnsupported)
			}
			if err := ch.Charge(ctx, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: k.Key, Limits: []bouncer.Limit{after}}}, Cost: n}); err != nil {
				return err
			}
		}
	}
	return nil
}

// used is what key has used of l: its capacity less what a peek finds
// left.
func (e *Engine) used(ctx context.Context, key string, l bouncer.Limit) (int64, error) {
	d, err := e.limiter().Check(ctx, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Peek: true})
	if err != nil {
		return 0, err
	}
	return max(l.Capacity()-d.Remaining, 0), nil
}

// withRate returns l of rule with its rate from rates, clamped to the
// rule's bounds for it (a reload may have narrowed them), or l itself
// when rates has none for it. A bucket whose burst is its rate (the
// default) keeps it so; another burst stays.
func withRate(l bouncer.Limit, rule *Rule, rates map[string]int64) bouncer.Limit {
	v, ok := rates[l.Name]
	if !ok || rule == nil {
		return l
	}
	b, ok := rule.Overrides[l.Name]
	if !ok {
		return l // the rule no longer lets the key set it
	}
	n := l
	n.Rate = min(max(v, b.Min), b.Max)
	if l.Algorithm.UsesBurst() && l.Burst == l.Rate {
		n.Burst = n.Rate
	}
	if n.Validate() != nil {
		return l // within the bounds yet not a limit (more than one a nanosecond)
	}
	return n
}

// custom applies the runtime limits of each matched descriptor whose
// rule has overrides: one store read each. A store that keeps no
// records, or cannot answer, leaves the rule's limits.
func (e *Engine) custom(ctx context.Context, ms []*matched) {
	recs, ok := e.limiter().(store.Records)
	if !ok {
		return
	}
	for _, m := range ms {
		if m == nil || m.rule == nil || len(m.rule.Overrides) == 0 || !m.counted() {
			continue
		}
		v, had, err := recs.GetRecord(ctx, customKey(m.key))
		if err == nil && had {
			var rates map[string]int64
			if rates, err = decoded.rates(v); err == nil {
				m.limits = m.rule.apply(m.limits, rates)
			}
		}
		if err != nil {
			e.logger().DebugContext(ctx, "runtime limits not read: the rule's apply", "key", m.key, "err", err)
		}
	}
}

// decoded keeps the rates of the records read last, by their bytes: a
// check of a key with runtime limits finds them without decoding JSON.
var decoded = &rateCache{m: map[string]map[string]int64{}}

type rateCache struct {
	mu sync.Mutex
	m  map[string]map[string]int64 // record → its rates, read-only
}

// maxDecoded bounds the records the cache keeps; past it, it starts over.
const maxDecoded = 4096

func (c *rateCache) rates(v []byte) (map[string]int64, error) {
	c.mu.Lock()
	r, ok := c.m[string(v)]
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	var cu Custom
	if err := json.Unmarshal(v, &cu); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= maxDecoded {
		clear(c.m)
	}
	c.m[string(v)] = cu.Rates
	c.mu.Unlock()
	return cu.Rates, nil
}

// apply returns limits with rates set, a copy when any changes.
func (r *Rule) apply(limits []bouncer.Limit, rates map[string]int64) []bouncer.Limit {
	var out []bouncer.Limit
	for i, l := range limits {
		if n := withRate(l, r, rates); n != l {
			if out == nil {
				out = slices.Clone(limits)
			}
			out[i] = n
		}
	}
	if out == nil {
		return limits
	}
	return out
}

// ApplyLimits returns k with its runtime limits, if it has any, in place
// of its rule's: the limits its next check is decided under.
func (e *Engine) ApplyLimits(ctx context.Context, k KeyInfo) (KeyInfo, error) {
	if k.Rule == nil || len(k.Rule.Overrides) == 0 {
		return k, nil
	}
	c, had, err := e.Limits(ctx, k)
	if err != nil || !had {
		return k, err
	}
	k.Limits = k.Rule.apply(k.Limits, c.Rates)
	return k, nil
}

// FormatRate writes a rate of r's limits as its config does: for a rule
// with a price, an amount of its currency ("50.00"), else a count.
func (r *Rule) FormatRate(v int64) string {
	if r.Prices != nil {
		return FormatMoney(v)
	}
	return strconv.FormatInt(v, 10)
}

// ParseRate reads a rate of r's limits as its config writes it: for a
// rule with a price, an amount of its currency in micro-units, else a
// whole count; at most bouncer.MaxRate either way.
func (r *Rule) ParseRate(s string) (int64, error) {
	if r.Prices != nil {
		return ParseMoney(s, bouncer.MaxRate)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > bouncer.MaxRate {
		return 0, fmt.Errorf("want a whole rate from 1 to %d, got %q", int64(bouncer.MaxRate), s)
	}
	return v, nil
}

// amount is FormatRate with the currency, for messages.
func (r *Rule) amount(v int64) string {
	if r.Prices != nil {
		return r.FormatRate(v) + " " + r.Prices.Currency
	}
	return r.FormatRate(v)
}

func overridable(r *Rule) string {
	return fmt.Sprint(slices.Sorted(maps.Keys(r.Overrides)))
}

func ruleLabel(r *Rule) string {
	if r == nil {
		return "(none)"
	}
	return fmt.Sprintf("%q", r.Label())
}
