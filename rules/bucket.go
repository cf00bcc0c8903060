package rules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// MaxBucketEntries is the most entries a quota bucket id may have (see
// Engine.Bucket): its entries are tried in every order a rule's branch
// can name them, so their number is kept small.
const MaxBucketEntries = 8

// Bucket is the rule a quota bucket falls under (Envoy's rate limit quota
// service, RLQS, whose bucket ids are maps of strings).
type Bucket struct {
	// Entries are the bucket id's entries in the order the rule's branch
	// names them: the descriptor RLS clients would send for it.
	Entries []Entry
	Rule    *Rule

	// Key is the key the bucket is counted under, the one an RLS
	// descriptor of Entries is counted under.
	Key string

	// Unlimited is set for an unlimited rule. Otherwise Rate per Period
	// is the rule's rate (its tightest limit's, in Bouncer's format); a
	// Rate of 0 admits nothing.
	Unlimited bool
	Rate      int64
	Period    time.Duration

	// MaxReport is the most one report of the bucket's usage is
	// charged: the rule's Rule.MaxReport, or its default.
	MaxReport int64

	limits []bouncer.Limit // what Key is counted under (ChargeBucket)
}

// ChargeBucket charges hits to b's count, whatever it holds, past its
// limit if need be (as Report does for b.Entries, without reading the
// state back): how RLQS usage reported after the fact is counted. hits
// above b.MaxReport are cut to it, so that one report cannot put the key
// deep into debt. An unlimited bucket, or one that counts nothing, is
// charged nothing. A Limiter that is not a store.Charger fails with an
// error wrapping errors.ErrUnsupported.
func (e *Engine) ChargeBucket(ctx context.Context, b Bucket, hits uint64) error {
	if b.Unlimited || len(b.limits) == 0 || hits == 0 {
		return nil
	}
	ch, ok := e.limiter().(store.Charger)
	if !ok {
		return fmt.Errorf("rules: %T cannot charge without deciding: %w", e.limiter(), errors.ErrUnsupported)
	}
	cost := int64(min(hits, MaxHits))
	if b.MaxReport > 0 {
		cost = min(cost, b.MaxReport)
	}
	return ch.Charge(ctx, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: b.Key, Limits: b.limits}}, Cost: cost})
}

// Bucket finds the rule of a quota bucket of domain: a bucket id is a map
// with no order, so its entries are tried in each order a branch of the
// domain's descriptor tree names them (at each level the keys in sorted
// order, each matched as Decide matches an entry), and the first order
// that ends on a rule is the bucket's. It reports false when no rule
// matches (or the domain is unknown), and fails on an id Decide would
// refuse, or one of more than MaxBucketEntries entries.
func (e *Engine) Bucket(domain string, id map[string]string) (Bucket, bool, error) {
	if len(id) > MaxBucketEntries {
		return Bucket{}, false, fmt.Errorf("%w: a bucket id of %d entries, at most %d", bouncer.ErrInvalidRequest, len(id), MaxBucketEntries)
	}
	keys := slices.Sorted(maps.Keys(id))
	entries := make([]Entry, len(keys))
	for i, k := range keys {
		entries[i] = Entry{Key: k, Value: id[k]}
	}
	r := Request{Domain: domain, Descriptors: []Descriptor{{Entries: entries}}}
	if err := r.validate(); err != nil {
		return Bucket{}, false, err
	}
	d := e.Config().Domain(domain)
	if d == nil {
		return Bucket{}, false, nil
	}
	var plan []Entry // the plan entry qualifies the descriptor, wherever it is
	if d.PlanKey != "" {
		if v, ok := id[d.PlanKey]; ok {
			plan = []Entry{{Key: d.PlanKey, Value: v}}
			entries = slices.DeleteFunc(entries, func(e Entry) bool { return e.Key == d.PlanKey })
		}
	}
	ordered := d.root.order(entries, make([]bool, len(entries)), make([]Entry, 0, len(entries)+1))
	if ordered == nil {
		return Bucket{}, false, nil
	}
	ordered = append(ordered, plan...)
	r.Descriptors[0].Entries = ordered
	var m matched
	if !d.match(&r, 0, r.Descriptors[0], make([]string, len(ordered)), &m) || m.rule == nil {
		return Bucket{}, false, nil
	}
	b := Bucket{Entries: ordered, Rule: m.rule, Key: m.key, Unlimited: m.unlimited, MaxReport: m.reportBound(), limits: m.limits}
	if m.unlimited {
		return b, true, nil
	}
	b.Rate, b.Period = int64(m.report.RequestsPerUnit), m.report.Window
	if !m.shared {
		for _, l := range m.limits {
			// The tightest limit: the least per second.
			if b.Period == 0 || float64(l.Rate)/l.Period.Seconds() < float64(b.Rate)/b.Period.Seconds() {
				b.Rate, b.Period = l.Rate, l.Period
			}
		}
	}
	return b, true, nil
}

// order is the first order of entries that a branch from n names, ending
// on a rule; nil when there is none. used marks the entries path holds.
func (n *node) order(entries []Entry, used []bool, path []Entry) []Entry {
	for i, e := range entries {
		if used[i] {
			continue
		}
		next, _ := n.step(e)
		if next == nil {
			continue
		}
		path = append(path, e)
		if len(path) == len(entries) {
			if next.rule != nil {
				return path
			}
		} else {
			used[i] = true
			if found := next.order(entries, used, path); found != nil {
				return found
			}
			used[i] = false
		}
		path = path[:len(path)-1]
	}
	return nil
}
