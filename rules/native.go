package rules

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
)

// nativeFile is a config file in Bouncer's own format; see
// docs/configuration.md.
type nativeFile struct {
	Domain   string       `yaml:"domain"`
	Plans    *nativePlans `yaml:"plans"`
	ClientIP *nativeIP    `yaml:"client_ip"`
	Rules    []nativeRule `yaml:"rules"`
}

type nativePlans struct {
	At      pos
	Key     string `yaml:"key"`
	Default string `yaml:"default"`
}

type nativeIP struct {
	At         pos
	Keys       []string `yaml:"keys"`
	IPv4Prefix *int     `yaml:"ipv4_prefix"`
	IPv6Prefix *int     `yaml:"ipv6_prefix"`
}

type nativeRule struct {
	At           pos
	Name         string                `yaml:"name"`
	Match        []nativeEntry         `yaml:"match"`
	Algorithm    string                `yaml:"algorithm"`
	Limits       []nativeLimit         `yaml:"limits"`
	Plans        map[string]nativePlan `yaml:"plans"`
	Unlimited    bool                  `yaml:"unlimited"`
	Shadow       bool                  `yaml:"shadow"`
	OnStoreError string                `yaml:"on_store_error"`
	ChargeDenied bool                  `yaml:"charge_denied"`
	Replaces     []string              `yaml:"replaces"`
	RefundOn5xx  bool                  `yaml:"refund_on_5xx"`
}

type nativeEntry struct {
	At    pos
	Key   string `yaml:"key"`
	Value string `yaml:"value"`
	Share bool   `yaml:"share"`
}

type nativePlan struct {
	At        pos
	Limits    []nativeLimit `yaml:"limits"`
	Unlimited bool          `yaml:"unlimited"`
}

type nativeLimit struct {
	At        pos
	Name      string        `yaml:"name"`
	Algorithm string        `yaml:"algorithm"`
	Rate      int64         `yaml:"rate"`
	Period    time.Duration `yaml:"period"`
	Burst     int64         `yaml:"burst"`
	Shape     bool          `yaml:"shape"`
}

func compileNative(file string, f *nativeFile, line int, errs *errorList, o LoadOptions) *Domain {
	d := &Domain{File: file, Name: f.Domain, Semantics: BouncerSemantics, root: newNode()}
	c := nativeCompiler{file: file, errs: errs, d: d, o: o}
	if f.Domain == "" {
		c.errorf(line, "domain: required")
	}
	if p := f.Plans; p != nil {
		if p.Key == "" {
			c.errorf(p.At.Line, "plans.key: required: the descriptor entry whose value names the plan")
		}
		d.PlanKey, d.DefaultPlan = p.Key, p.Default
	}
	if ip := f.ClientIP; ip != nil {
		pfx := ipPrefix{v4: 32, v6: 64}
		if ip.IPv4Prefix != nil {
			pfx.v4 = *ip.IPv4Prefix
		}
		if ip.IPv6Prefix != nil {
			pfx.v6 = *ip.IPv6Prefix
		}
		if pfx.v4 < 1 || pfx.v4 > 32 {
			c.errorf(ip.At.Line, "client_ip.ipv4_prefix: want 1 to 32, got %d", pfx.v4)
		}
		if pfx.v6 < 1 || pfx.v6 > 128 {
			c.errorf(ip.At.Line, "client_ip.ipv6_prefix: want 1 to 128, got %d", pfx.v6)
		}
		if len(ip.Keys) == 0 {
			c.errorf(ip.At.Line, "client_ip.keys: name at least one descriptor entry key that carries a client IP")
		}
		d.ips = map[string]ipPrefix{}
		for _, k := range ip.Keys {
			d.ips[k] = pfx
		}
	}
	names := map[string]int{}
	for i, nr := range f.Rules {
		if nr.Name == "" {
			c.errorf(nr.At.Line, "rules[%d].name: required", i)
		} else if prev, dup := names[nr.Name]; dup {
			c.errorf(nr.At.Line, "rules[%d]: duplicate rule name %q (first at line %d)", i, nr.Name, prev)
		} else {
			names[nr.Name] = nr.At.Line
		}
		c.rule(i, nr)
	}
	for _, r := range d.Rules {
		for _, rp := range r.Replaces {
			if rp == r.Name {
				c.errorf(r.Line, "rule %q replaces itself, so it could never apply", r.Name)
				continue
			}
			if _, ok := names[rp]; !ok {
				c.errorf(r.Line, "rule %q replaces %q, which no rule of domain %q is named", r.Name, rp, d.Name)
			}
		}
	}
	return d
}

type nativeCompiler struct {
	file string
	errs *errorList
	d    *Domain
	o    LoadOptions
}

func (c *nativeCompiler) errorf(line int, format string, args ...any) {
	c.errs.add(c.file, line, fmt.Sprintf(format, args...))
}

func (c *nativeCompiler) rule(i int, nr nativeRule) {
	at := fmt.Sprintf("rules[%d]", i)
	r := &Rule{
		Domain: c.d.Name, Name: nr.Name, File: c.file, Line: nr.At.Line,
		Unlimited: nr.Unlimited, Shadow: nr.Shadow, Replaces: nr.Replaces,
		RefundOn5xx: nr.RefundOn5xx,
	}
	if len(nr.Match) == 0 {
		c.errorf(nr.At.Line, "%s.match: want at least one descriptor entry", at)
		return
	}
	var policy bouncer.StoreErrorPolicy
	if nr.OnStoreError != "" {
		p, err := bouncer.ParseStoreErrorPolicy(nr.OnStoreError)
		if err != nil {
			c.errorf(nr.At.Line, "%s.on_store_error: %v", at, err)
		}
		policy = p
	}
	limits := func(where string, ls []nativeLimit, unlimited bool, line int) []bouncer.Limit {
		if unlimited {
			if len(ls) > 0 {
				c.errorf(line, "%s: unlimited takes no limits", where)
			}
			return nil
		}
		if len(ls) == 0 {
			c.errorf(line, "%s.limits: want at least one limit (or unlimited: true)", where)
		}
		var out []bouncer.Limit
		for j, nl := range ls {
			l, ok := c.limit(fmt.Sprintf("%s.limits[%d]", where, j), j, nl, nr, policy)
			if !ok {
				continue
			}
			if slices.ContainsFunc(out, func(o bouncer.Limit) bool { return o.Name == l.Name }) {
				c.errorf(nl.At.Line, "%s.limits[%d]: two limits named %q", where, j, l.Name)
				continue
			}
			out = append(out, l)
		}
		return out
	}
	r.Limits = limits(at, nr.Limits, nr.Unlimited, nr.At.Line)
	if len(nr.Plans) > 0 {
		if c.d.PlanKey == "" {
			c.errorf(nr.At.Line, "%s.plans: the domain has no plans section naming the descriptor entry that carries the plan", at)
		}
		r.Plans = map[string]Plan{}
		for name, p := range nr.Plans {
			r.Plans[name] = Plan{
				Limits:    limits(fmt.Sprintf("%s.plans.%s", at, name), p.Limits, p.Unlimited, p.At.Line),
				Unlimited: p.Unlimited,
			}
		}
	}
	if len(r.Limits) > 0 {
		r.RequestsPerUnit = uint32(min(r.Limits[0].Rate, 1<<32-1))
		r.Unit = unitOf(r.Limits[0].Period)
	}

	cur := c.d.root
	var steps []string
	for j, e := range nr.Match {
		if e.Key == "" {
			c.errorf(e.At.Line, "%s.match[%d].key: required", at, j)
			return
		}
		if e.Key == c.d.PlanKey {
			c.errorf(e.At.Line, "%s.match[%d]: %q carries the plan; it is not matched", at, j, e.Key)
			return
		}
		step := e.Key
		if e.Value != "" {
			step += "_" + e.Value
		}
		steps = append(steps, step)
		if e.Share && !strings.HasSuffix(e.Value, "*") {
			c.errorf(e.At.Line, "%s.match[%d].share: only for a wildcard value (ending with '*')", at, j)
		}
		next := lookupStep(cur, e)
		if next != nil && next.share != e.Share {
			c.errorf(e.At.Line, "%s.match[%d]: share is %v here but %v in an earlier rule matching the same entry; one counter cannot be both", at, j, e.Share, next.share)
			return
		}
		if next == nil {
			next = newNode()
			switch attach(cur, Entry{e.Key, e.Value}, e.Value != "", next) {
			case shadowed:
				c.errorf(e.At.Line, "%s.match[%d]: unreachable: every value it matches is matched first by a wildcard of the same key", at, j)
				return
			}
			next.share, next.pattern = e.Share, e.Value
		}
		cur = next
	}
	r.Path = strings.Join(steps, ".")
	if cur.rule != nil {
		c.errorf(nr.At.Line, "%s: rule %q matches the same descriptors as rule %q (line %d), so one of them could never apply", at, nr.Name, cur.rule.Name, cur.rule.Line)
		return
	}
	cur.rule = r
	c.d.Rules = append(c.d.Rules, r)
}

// lookupStep returns the node already attached under n for config entry
// e, or nil.
func lookupStep(n *node, e nativeEntry) *node {
	switch {
	case e.Value == "":
		return n.any[e.Key]
	case strings.HasSuffix(e.Value, "*"):
		for _, w := range n.wildcards {
			if w.key == e.Key && w.prefix == strings.TrimSuffix(e.Value, "*") {
				return w.next
			}
		}
		return nil
	default:
		return n.exact[Entry{e.Key, e.Value}]
	}
}

func (c *nativeCompiler) limit(at string, j int, nl nativeLimit, nr nativeRule, policy bouncer.StoreErrorPolicy) (bouncer.Limit, bool) {
	algName := nl.Algorithm
	if algName == "" {
		algName = nr.Algorithm
	}
	if algName == "" {
		algName = bouncer.TokenBucket.String()
	}
	a, err := bouncer.ParseAlgorithm(algName)
	if err == nil {
		err = c.o.algorithm(a)
	}
	if err != nil {
		c.errorf(nl.At.Line, "%s.algorithm: %v", at, err)
		return bouncer.Limit{}, false
	}
	l := bouncer.Limit{
		Name: nl.Name, Algorithm: a, Rate: nl.Rate, Period: nl.Period,
		Burst: nl.Burst, Shape: nl.Shape, OnStoreError: policy,
		ChargeDenied: nr.ChargeDenied,
	}
	if l.Name == "" {
		l.Name = fmt.Sprintf("%d_per_%s", l.Rate, periodName(l.Period))
	}
	if a.UsesBurst() && l.Burst == 0 {
		l.Burst = l.Rate // the usual default: one period's worth
	}
	if err := l.Validate(); err != nil {
		c.errorf(nl.At.Line, "%s: %v", at, err)
		return bouncer.Limit{}, false
	}
	return l, true
}

// periodName writes a period the way a config would: "1s", "1m30s",
// "1m", "1h30m", "7d".
func periodName(p time.Duration) string {
	const day = 24 * time.Hour
	if p >= day && p%day == 0 {
		return fmt.Sprintf("%dd", p/day)
	}
	s := p.String()
	s, _ = strings.CutSuffix(s, "m0s")
	if strings.HasSuffix(p.String(), "m0s") {
		s += "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}
