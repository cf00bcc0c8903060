package rules

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/calendar"
	"github.com/bouncerhq/bouncer/internal/storekey"
)

// Entry is one key/value pair of a descriptor, as Envoy sends them.
type Entry struct {
	Key   string
	Value string
}

// node is one level of a domain's descriptor tree: what an entry at this
// depth may match, and the rule that applies when a descriptor ends here.
type node struct {
	exact     map[Entry]*node  // key and value
	any       map[string]*node // key with any value
	wildcards []wildcard       // key with a value pattern ("foo*", "/api/*/v1"), in file order
	rule      *Rule

	// share, for a node reached through a wildcard, makes every value
	// the wildcard matches count as one (share_threshold): the key is
	// built with pattern in place of the value.
	share   bool
	pattern string
}

type wildcard struct {
	key     string
	pattern pattern
	next    *node
}

// pattern is a value with at least one '*', split at each: every '*'
// matches any run of characters, none included. "foo*" is the pattern
// {"foo", ""}, "/api/*/v1" is {"/api/", "/v1"}, "*" is {"", ""}.
type pattern []string

// isPattern reports whether a config value is a pattern rather than one
// exact value.
func isPattern(value string) bool { return strings.Contains(value, "*") }

func newPattern(value string) pattern { return strings.Split(value, "*") }

// prefix is the literal text every value p matches starts with; p is a
// prefix pattern ("foo*") when it is all p says.
func (p pattern) prefix() string { return p[0] }

func (p pattern) isPrefix() bool { return len(p) == 2 && p[1] == "" }

// matches reports whether v is one of p's values. The first and last
// parts are anchored at v's ends; each part between is found leftmost in
// what is left, which for '*' alone finds a match whenever there is one.
func (p pattern) matches(v string) bool {
	first, last := p[0], p[len(p)-1]
	if len(v) < len(first)+len(last) || !strings.HasPrefix(v, first) || !strings.HasSuffix(v, last) {
		return false
	}
	rest := v[len(first) : len(v)-len(last)]
	for _, part := range p[1 : len(p)-1] {
		i := strings.Index(rest, part)
		if i < 0 {
			return false
		}
		rest = rest[i+len(part):]
	}
	return true
}

// covers reports whether every value q matches is matched by p too, as
// far as that is simple to know: a prefix pattern covers any pattern
// whose prefix extends its own. (A later pattern that an earlier one of
// another shape covers is not found; it is only never matched.)
func (p pattern) covers(q pattern) bool {
	return p.isPrefix() && strings.HasPrefix(q.prefix(), p.prefix())
}

func (p pattern) String() string { return strings.Join(p, "*") }

func newNode() *node {
	return &node{exact: map[Entry]*node{}, any: map[string]*node{}}
}

func (n *node) leaf() bool {
	return len(n.exact) == 0 && len(n.any) == 0 && len(n.wildcards) == 0
}

// step is the node entry e leads to from n: the exact key and value,
// then value patterns in file order (viaWildcard), then the key with any
// value; nil when none.
func (n *node) step(e Entry) (next *node, viaWildcard bool) {
	if next := n.exact[e]; next != nil {
		return next, false
	}
	for _, w := range n.wildcards {
		if w.key == e.Key && w.pattern.matches(e.Value) {
			return w.next, true
		}
	}
	return n.any[e.Key], false
}

// match is the result of looking a descriptor up in a domain's tree.
type match struct {
	rule *Rule

	// values are the values the descriptor's key is made of: the
	// entries' values, with share_threshold patterns in place.
	values []string
}

// lookup finds the rule for a descriptor the way envoyproxy/ratelimit
// does: each entry descends one level, trying the exact key and value
// first, then value patterns ("foo*", "/api/*/v1") in file order, then the key with
// any value; the rule applies only if the descriptor's last entry lands on
// a level that has one. A descriptor longer than the tree's branch finds
// nothing.
//
// Unlike envoyproxy/ratelimit, which matches the string key+"_"+value,
// Bouncer compares keys and values separately, so that key "a_b" with
// value "c" never matches key "a" with value "b_c".
func (n *node) lookup(entries []Entry, values []string) match {
	var m match
	cur := n
	for i, e := range entries {
		next, viaWildcard := cur.step(e)
		values[i] = e.Value
		if viaWildcard && next.share {
			values[i] = next.pattern
		}
		if next == nil {
			break
		}
		if next.rule != nil && i == len(entries)-1 {
			m.rule = next.rule
		}
		if next.leaf() {
			break
		}
		cur = next
	}
	m.values = values[:len(entries)] // read only when a rule was found: all set then
	return m
}

// matched is one descriptor after lookup.
type matched struct {
	rule      *Rule
	limits    []bouncer.Limit
	unlimited bool
	shadow    bool
	quota     bool
	shared    bool    // envoy semantics: limits count per unit window (countLimit), report.RequestsPerUnit judges
	entries   []Entry // as matched: client IPs aggregated, the plan left out
	key       string
	cost      int64
	report    CurrentLimit
}

// Replaced reports whether the descriptor matched a rule that another
// rule of the same request replaces (envoyproxy/ratelimit's replaces):
// Rule is then the replaced rule, and Limit is nil, since no limit was
// checked. The answer is OK, as for a descriptor no rule matches; RLS and
// the JSON API report it as envoyproxy/ratelimit does, without a
// current_limit and with limit_remaining 0.
func (s *Status) Replaced() bool { return s.Rule != nil && s.Limit == nil && !s.Unlimited }

// replacement is a descriptor's rule that another matched rule replaces.
type replacement struct {
	rule, by *Rule
}

// counted reports whether m is checked in the store: matched, limited,
// and not unlimited.
func (m *matched) counted() bool { return m != nil && !m.unlimited && len(m.limits) > 0 }

// matchAll looks every descriptor up and applies replaces: a rule named in
// the replaces of another matched rule does not apply, and is left out
// of ms and named in replaced (nil when no rule was replaced).
func (d *Domain) matchAll(r *Request) (ms []*matched, replaced []replacement) {
	ms = make([]*matched, len(r.Descriptors))
	pool := make([]matched, len(r.Descriptors))
	var by map[string]*Rule
	var buf [8]string
	values := buf[:]
	for _, desc := range r.Descriptors {
		if len(desc.Entries) > len(values) {
			values = make([]string, MaxEntries)
		}
	}
	for i, desc := range r.Descriptors {
		m := &pool[i]
		if !d.match(r, i, desc, values, m) {
			continue
		}
		ms[i] = m
		if m.rule != nil && len(m.rule.Replaces) > 0 {
			if by == nil {
				by = map[string]*Rule{}
			}
			for _, name := range m.rule.Replaces {
				by[name] = m.rule
			}
		}
	}
	if by == nil {
		return ms, nil
	}
	for i, m := range ms {
		if m != nil && m.rule != nil && !m.unlimited && m.rule.Name != "" && by[m.rule.Name] != nil {
			if replaced == nil {
				replaced = make([]replacement, len(ms))
			}
			replaced[i] = replacement{rule: m.rule, by: by[m.rule.Name]}
			ms[i] = nil
		}
	}
	return ms, replaced
}

// explain logs, at Debug, the descriptors of r that matched nothing
// because they carry only the plan entry, and those whose rule was
// replaced: both answer OK with no limit, which says nothing of why.
func (d *Domain) explain(ctx context.Context, log *slog.Logger, r *Request, ms []*matched, replaced []replacement) {
	for i, desc := range r.Descriptors {
		switch {
		case replaced != nil && replaced[i].rule != nil:
			rp := replaced[i]
			log.DebugContext(ctx, "descriptor not limited: its rule is replaced by another rule of the request",
				"domain", d.Name, "descriptor", i, "rule", rp.rule.Path, "rule_name", rp.rule.Name,
				"replaced_by", rp.by.Path, "replaced_by_name", rp.by.Name)
		case ms[i] == nil && d.PlanKey != "" && len(desc.Entries) > 0 && onlyPlan(desc.Entries, d.PlanKey):
			log.DebugContext(ctx, "descriptor not limited: it carries only the plan entry; the plan entry belongs in the descriptor it qualifies",
				"domain", d.Name, "descriptor", i, "plan_key", d.PlanKey)
		}
	}
}

func onlyPlan(entries []Entry, planKey string) bool {
	for _, e := range entries {
		if e.Key != planKey {
			return false
		}
	}
	return true
}

// match looks descriptor i up, filling m; false when no rule applies.
func (d *Domain) match(r *Request, i int, desc Descriptor, values []string, m *matched) bool {
	entries, plan, anchor, zone := desc.Entries, "", "", ""
	if d.PlanKey != "" || d.ips != nil || d.AnchorKey != "" || d.ZoneKey != "" {
		entries = make([]Entry, 0, len(desc.Entries))
		for _, e := range desc.Entries {
			if d.PlanKey != "" && e.Key == d.PlanKey {
				plan = e.Value
				continue
			}
			if d.AnchorKey != "" && e.Key == d.AnchorKey {
				anchor = e.Value
				continue
			}
			if d.ZoneKey != "" && e.Key == d.ZoneKey {
				zone = e.Value
				continue
			}
			if p, ok := d.ips[e.Key]; ok {
				e.Value = p.apply(e.Value)
			}
			entries = append(entries, e)
		}
		if plan == "" {
			plan = d.DefaultPlan
		}
	}
	m.cost, m.entries = r.hits(i), entries
	if o := desc.Limit; o != nil {
		l := d.overrideLimit(o)
		for j, e := range entries {
			values[j] = e.Value
		}
		m.key = storeKey(d.Name, entries, values[:len(entries)])
		m.report = CurrentLimit{Name: "", RequestsPerUnit: o.RequestsPerUnit, Unit: o.Unit, Window: l.Period}
		switch {
		case d.Semantics == EnvoySemantics:
			m.limits, m.shared = []bouncer.Limit{countLimit(o.Unit)}, true
		case l.Rate > 0:
			m.limits = []bouncer.Limit{l}
		}
		return true
	}
	found := d.root.lookup(entries, values)
	if found.rule == nil {
		return false
	}
	rule := found.rule
	m.rule = rule
	if rule.Prices != nil || r.Usage != nil {
		m.cost = r.cost(i, rule)
	}
	m.limits, m.unlimited = rule.limitsFor(plan)
	if anchor != "" || zone != "" {
		m.limits = anchored(m.limits, anchor, zone)
	}
	m.shadow, m.quota = rule.Shadow, rule.QuotaMode
	if m.unlimited {
		return true
	}
	m.key = storeKey(d.Name, entries, found.values)
	m.report = CurrentLimit{Name: rule.Name, RequestsPerUnit: rule.RequestsPerUnit, Unit: rule.Unit, Window: rule.Unit.Duration()}
	if len(m.limits) == 0 {
		return true
	}
	l := m.limits[0]
	if !rule.zero {
		m.report.RequestsPerUnit = uint32(min(l.Rate, math.MaxUint32))
		m.report.Unit, m.report.Window = unitOf(l.Period), l.Period
	}
	if d.Semantics == EnvoySemantics && l.Mode == bouncer.Strict && m.report.Unit != UnitUnknown {
		// One count per entries and window, shared with the overrides
		// of the same entries and unit (countLimit).
		m.limits, m.shared = []bouncer.Limit{countLimit(m.report.Unit)}, true
	}
	return true
}

// anchored returns limits with their calendar periods anchored on the
// day anchor names and in the zone zone names (see Domain.AnchorKey and
// ZoneKey): a copy when any changes. An anchor that is not a day of the
// period (0, 32, "x", or 8 for a week) or a zone that is none ("Mars")
// leaves that part of a limit as its rule has it.
func anchored(limits []bouncer.Limit, anchor, zone string) []bouncer.Limit {
	day, err := strconv.Atoi(anchor)
	if err != nil || day < 1 || day > 31 {
		day = 0
	}
	var out []bouncer.Limit
	for i, l := range limits {
		c := l.Calendar
		if c.IsZero() {
			continue
		}
		if day != 0 && (c.Unit == calendar.Month || c.Unit == calendar.Week) {
			if a := (calendar.Period{Unit: c.Unit, Anchor: day}); a.Validate() == nil {
				c.Anchor = day
			}
		}
		if zone != "" {
			if z := (calendar.Period{Unit: c.Unit, Zone: zone}); z.Validate() == nil {
				c.Zone = zone
			}
		}
		if c == l.Calendar {
			continue
		}
		if out == nil {
			out = slices.Clone(limits)
		}
		out[i].Calendar = c
	}
	if out == nil {
		return limits
	}
	return out
}

// storeKey is the key a descriptor is counted under: the domain and the
// entries' keys and values, escaped and bounded by storekey.Join.
func storeKey(domain string, entries []Entry, values []string) string {
	var buf [9]string // a domain and four entries without allocating
	parts := buf[:0]
	parts = append(parts, domain)
	for i, e := range entries {
		parts = append(parts, e.Key, values[i])
	}
	return storekey.Join(parts...)
}
