package rules

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/calendar"
	"github.com/bouncerhq/bouncer/internal/yamlconf"
	"go.yaml.in/yaml/v3"
)

// nativeFile is a config file in Bouncer's own format; see
// docs/configuration.md.
type nativeFile struct {
	Domain   string                  `yaml:"domain"`
	Plans    *nativePlans            `yaml:"plans"`
	Calendar *nativeCalendar         `yaml:"calendar"`
	Prices   map[string]nativePrices `yaml:"prices"`
	ClientIP *nativeIP               `yaml:"client_ip"`
	Rules    []nativeRule            `yaml:"rules"`
}

type nativePlans struct {
	At      pos
	Key     string `yaml:"key"`
	Default string `yaml:"default"`
}

type nativePrices struct {
	At       pos
	Currency string                       `yaml:"currency"`
	Per      *int64                       `yaml:"per"`
	Default  string                       `yaml:"default"`
	Models   map[string]nativeModelPrices `yaml:"models"`
}

type nativeModelPrices struct {
	At     pos
	Input  yaml.Node `yaml:"input"`
	Output yaml.Node `yaml:"output"`
	Cached yaml.Node `yaml:"cached"`
}

type nativeCalendar struct {
	At        pos
	AnchorKey string `yaml:"anchor_key"`
	ZoneKey   string `yaml:"zone_key"`
}

type nativeIP struct {
	At         pos
	Keys       []string `yaml:"keys"`
	IPv4Prefix *int     `yaml:"ipv4_prefix"`
	IPv6Prefix *int     `yaml:"ipv6_prefix"`
}

type nativeRule struct {
	At           pos
	Name         string                  `yaml:"name"`
	Match        []nativeEntry           `yaml:"match"`
	Algorithm    string                  `yaml:"algorithm"`
	AlgorithmAt  pos                     `yamlconf:"algorithm"`
	Limits       []nativeLimit           `yaml:"limits"`
	Plans        map[string]nativePlan   `yaml:"plans"`
	Unlimited    bool                    `yaml:"unlimited"`
	Shadow       bool                    `yaml:"shadow"`
	OnStoreError string                  `yaml:"on_store_error"`
	Mode         string                  `yaml:"mode"`
	ModeAt       pos                     `yamlconf:"mode"`
	ChargeDenied bool                    `yaml:"charge_denied"`
	Replaces     []string                `yaml:"replaces"`
	RefundOn5xx  bool                    `yaml:"refund_on_5xx"`
	MaxReport    *int64                  `yaml:"max_report"`
	Price        string                  `yaml:"price"`
	PriceAt      pos                     `yamlconf:"price"`
	Overrides    map[string]nativeBounds `yaml:"overrides"`
	OverridesAt  pos                     `yamlconf:"overrides"`
}

// nativeBounds bound a limit's rate, or a budget, that a key's runtime
// limits may set.
type nativeBounds struct {
	At  pos
	Min yaml.Node `yaml:"min"`
	Max yaml.Node `yaml:"max"`
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
	At          pos
	Name        string    `yaml:"name"`
	Algorithm   string    `yaml:"algorithm"`
	AlgorithmAt pos       `yamlconf:"algorithm"`
	Rate        yaml.Node `yaml:"rate"`   // read by wholeRates into rate, to advise on a fraction
	Budget      yaml.Node `yaml:"budget"` // a priced rule's rate, in its currency: read by wholeRates into rate, in micro-units
	rate        int64
	Period      yaml.Node `yaml:"period"` // read by wholeRates into period or cal
	period      time.Duration
	cal         calendar.Unit
	Timezone    string `yaml:"timezone"`
	TimezoneAt  pos    `yamlconf:"timezone"`
	Anchor      *int   `yaml:"anchor"`
	AnchorAt    pos    `yamlconf:"anchor"`
	Burst       *int64 `yaml:"burst"` // nil: one period's worth
	Shape       bool   `yaml:"shape"`
	Mode        string `yaml:"mode"`
	ModeAt      pos    `yamlconf:"mode"`
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
	c.prices(f.Prices)
	if a := f.Calendar; a != nil {
		switch {
		case a.AnchorKey == "" && a.ZoneKey == "":
			c.errorf(a.At.Line, "calendar: name anchor_key (the descriptor entry whose value is the day a caller's calendar months or weeks start on), zone_key (the entry naming its time zone), or both")
		case a.AnchorKey == a.ZoneKey:
			c.errorf(a.At.Line, "calendar: anchor_key and zone_key name one entry, %q", a.AnchorKey)
		case f.Plans != nil && (a.AnchorKey == f.Plans.Key || a.ZoneKey == f.Plans.Key):
			c.errorf(a.At.Line, "calendar: an entry of its own, not the plans' %q", f.Plans.Key)
		}
		d.AnchorKey, d.ZoneKey = a.AnchorKey, a.ZoneKey
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

// rule compiles rules[i]: its limits, and its place in the domain's
// match tree.
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
	if nr.MaxReport != nil {
		if n := *nr.MaxReport; n < 1 || n > MaxHits {
			c.errorf(nr.At.Line, "%s.max_report: want 1 to %d, got %d", at, int64(MaxHits), n)
		}
		r.MaxReport = *nr.MaxReport
	}
	if nr.Price != "" {
		if r.Prices = c.d.Prices[nr.Price]; r.Prices == nil {
			c.errorf(max(nr.PriceAt.Line, nr.At.Line), "%s.price: no price table %q: name one of the top-level prices", at, nr.Price)
			return
		}
	}
	c.ruleLimits(at, nr, r)
	c.overrides(at, nr, r)
	c.d.custom = c.d.custom || len(r.Overrides) > 0
	if !c.place(at, nr, r) {
		return
	}
	c.d.Rules = append(c.d.Rules, r)
}

// ruleLimits compiles the limits of rule nr into r: its own, and each
// plan's, with the rule's algorithm, on_store_error and mode as their
// defaults.
func (c *nativeCompiler) ruleLimits(at string, nr nativeRule, r *Rule) {
	var policy bouncer.StoreErrorPolicy
	if nr.OnStoreError != "" {
		p, err := bouncer.ParseStoreErrorPolicy(nr.OnStoreError)
		if err != nil {
			c.errorf(nr.At.Line, "%s.on_store_error: %v", at, err)
		}
		policy = p
	}
	ruleAlg := true // the rule's algorithm, if any, is valid
	if nr.Algorithm != "" {
		if _, err := bouncer.ParseAlgorithm(nr.Algorithm); err != nil {
			c.errorf(nr.AlgorithmAt.Line, "%s.algorithm: %s", at, c.badAlgorithm(nr.Algorithm))
			ruleAlg = false
		}
	}
	ruleMode := true // the rule's mode, if any, is valid
	if _, err := bouncer.ParseMode(nr.Mode); err != nil {
		c.errorf(max(nr.ModeAt.Line, nr.At.Line), "%s.mode: %v", at, err)
		ruleMode = false
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
			if nl.Algorithm == "" && !ruleAlg || nl.Mode == "" && !ruleMode {
				continue // reported once, at the rule
			}
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
}

// place puts r in the domain's match tree at the path of nr's match
// entries, adding the nodes it lacks, and names r by that path. It
// reports false, having said why, when r cannot go there.
func (c *nativeCompiler) place(at string, nr nativeRule, r *Rule) bool {
	cur := c.d.root
	var steps []string
	for j, e := range nr.Match {
		if e.Key == "" {
			c.errorf(e.At.Line, "%s.match[%d].key: required", at, j)
			return false
		}
		if e.Key == c.d.PlanKey {
			c.errorf(e.At.Line, "%s.match[%d]: %q carries the plan; it is not matched", at, j, e.Key)
			return false
		}
		step := e.Key
		if e.Value != "" {
			step += "_" + e.Value
		}
		steps = append(steps, step)
		if e.Share && !isPattern(e.Value) {
			c.errorf(e.At.Line, "%s.match[%d].share: only for a wildcard value (one with a '*')", at, j)
		}
		next := lookupStep(cur, e)
		if next != nil && next.share != e.Share {
			c.errorf(e.At.Line, "%s.match[%d]: share is %v here but %v in an earlier rule matching the same entry; one counter cannot be both", at, j, e.Share, next.share)
			return false
		}
		if next == nil {
			next = newNode()
			switch attach(cur, Entry{e.Key, e.Value}, e.Value != "", next) {
			case shadowed:
				c.errorf(e.At.Line, "%s.match[%d]: unreachable: every value it matches is matched first by a wildcard of the same key", at, j)
				return false
			}
			next.share, next.pattern = e.Share, e.Value
		}
		cur = next
	}
	r.Path = strings.Join(steps, ".")
	if cur.rule != nil {
		c.errorf(nr.At.Line, "%s: rule %q matches the same descriptors as rule %q (line %d), so one of them could never apply", at, nr.Name, cur.rule.Name, cur.rule.Line)
		return false
	}
	cur.rule = r
	return true
}

// lookupStep returns the node already attached under n for config entry
// e, or nil.
func lookupStep(n *node, e nativeEntry) *node {
	switch {
	case e.Value == "":
		return n.any[e.Key]
	case isPattern(e.Value):
		for _, w := range n.wildcards {
			if w.key == e.Key && w.pattern.String() == e.Value {
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
	if algName == "" && nl.cal != 0 {
		algName = bouncer.FixedWindow.String() // the one algorithm that counts calendar periods
	}
	if algName == "" {
		algName = bouncer.TokenBucket.String()
	}
	if reason := c.badAlgorithm(algName); reason != "" {
		c.errorf(max(nl.AlgorithmAt.Line, nl.At.Line), "%s.algorithm: %s", at, reason)
		return bouncer.Limit{}, false
	}
	if reason := limitMissing(nl); reason != "" {
		c.errorf(nl.At.Line, "%s: %s", at, reason)
		return bouncer.Limit{}, false
	}
	a, _ := bouncer.ParseAlgorithm(algName)
	l := bouncer.Limit{
		Name: nl.Name, Algorithm: a, Rate: nl.rate, Period: nl.period,
		Shape: nl.Shape, OnStoreError: policy,
		ChargeDenied: nr.ChargeDenied,
	}
	if !c.calendar(at, nl, &l) || !c.budget(at, nl, nr) {
		return bouncer.Limit{}, false
	}
	if l.Name == "" {
		what, per := strconv.FormatInt(l.Rate, 10), periodName(l.Period)
		if nl.cal != 0 {
			per = nl.cal.String()
		}
		if nl.Budget.Kind != 0 {
			what = strings.TrimSuffix(FormatMoney(l.Rate), ".00") + "_" + c.d.Prices[nr.Price].Currency
		}
		l.Name = what + "_per_" + per
	}
	switch {
	case nl.Burst != nil:
		l.Burst = *nl.Burst // burst: 0 is refused as the library refuses it
	case a.UsesBurst():
		l.Burst = l.Rate // the usual default: one period's worth
	}
	m, err := c.mode(nl, nr, l)
	if err != nil {
		c.errorf(max(nl.ModeAt.Line, nl.At.Line), "%s.mode: %v", at, err)
		return bouncer.Limit{}, false
	}
	l.Mode = m
	if err := l.Validate(); err != nil {
		c.errorf(nl.At.Line, "%s.%s", at, limitReason(err))
		return bouncer.Limit{}, false
	}
	return l, true
}

// overrides compiles which of r's limits a key's runtime limits may set,
// and within what bounds: a rate, or a budget in the rule's currency.
func (c *nativeCompiler) overrides(at string, nr nativeRule, r *Rule) {
	if len(nr.Overrides) == 0 {
		return
	}
	names := map[string]bool{}
	for _, l := range r.Limits {
		names[l.Name] = true
	}
	for _, p := range r.Plans {
		for _, l := range p.Limits {
			names[l.Name] = true
		}
	}
	r.Overrides = map[string]Bounds{}
	for name, nb := range nr.Overrides {
		where := fmt.Sprintf("%s.overrides.%s", at, name)
		if !names[name] {
			c.errorf(max(nb.At.Line, nr.OverridesAt.Line), "%s: the rule has no limit named %q", where, name)
			continue
		}
		b := Bounds{Min: 1, Max: bouncer.MaxRate}
		for _, f := range []struct {
			what string
			n    *yaml.Node
			v    *int64
		}{{"min", &nb.Min, &b.Min}, {"max", &nb.Max, &b.Max}} {
			if f.n.Kind == 0 {
				continue
			}
			v, err := r.ParseRate(f.n.Value)
			if err != nil {
				c.errorf(f.n.Line, "%s.%s: %v", where, f.what, err)
				continue
			}
			*f.v = v
		}
		if b.Min < 1 || b.Min > b.Max {
			c.errorf(max(nb.At.Line, nr.OverridesAt.Line), "%s: want 1 ≤ min ≤ max, got min %d, max %d", where, b.Min, b.Max)
			continue
		}
		r.Overrides[name] = b
	}
}

// budget reports, at its line, a limit that counts units in a priced
// rule or money in a rule without prices.
func (c *nativeCompiler) budget(at string, nl nativeLimit, nr nativeRule) bool {
	switch {
	case nr.Price != "" && nl.Budget.Kind == 0:
		c.errorf(nl.At.Line, "%s: a rule with a price counts money: write budget: (an amount of %s per period) instead of rate:", at, c.d.Prices[nr.Price].Currency)
		return false
	case nr.Price == "" && nl.Budget.Kind != 0:
		c.errorf(nl.Budget.Line, "%s.budget: only a rule with a price (a top-level price table) has budgets; count units with rate:", at)
		return false
	}
	return true
}

// prices compiles the domain's price tables, in name order (each one's
// charges' meter is its place).
func (c *nativeCompiler) prices(tables map[string]nativePrices) {
	names := make([]string, 0, len(tables))
	for name := range tables {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		np := tables[name]
		at := "prices." + name
		per := int64(1_000_000)
		models := map[string]ModelPrices{}
		if np.Currency == "" {
			c.errorf(np.At.Line, "%s.currency: required: the currency of the prices and budgets, such as USD", at)
		}
		if np.Per != nil {
			if per = *np.Per; per < 1 || per > MaxHits {
				c.errorf(np.At.Line, "%s.per: want the tokens a price is for, 1 to %d, got %d", at, int64(MaxHits), per)
				continue
			}
		}
		if len(np.Models) == 0 {
			c.errorf(np.At.Line, "%s.models: want at least one model's prices", at)
		}
		for model, nm := range np.Models {
			var mp ModelPrices
			for _, f := range []struct {
				name string
				n    *yaml.Node
				v    *int64
			}{{"input", &nm.Input, &mp.Input}, {"output", &nm.Output, &mp.Output}, {"cached", &nm.Cached, &mp.Cached}} {
				if f.n.Kind == 0 {
					continue // free
				}
				v, err := ParseMoney(f.n.Value, MaxPrice)
				if err != nil || f.n.Kind != yaml.ScalarNode {
					c.errorf(max(f.n.Line, nm.At.Line), "%s.models.%s.%s: %v", at, model, f.name, err)
					continue
				}
				*f.v = v
			}
			models[model] = mp
		}
		p := NewPrices(name, np.Currency, per, np.Default, models)
		p.meter = len(c.d.prices) + 1
		if _, ok := p.Models[p.Default]; p.Default != "" && !ok {
			c.errorf(np.At.Line, "%s.default: %q is not one of its models", at, p.Default)
		}
		c.d.prices = append(c.d.prices, p)
		if c.d.Prices == nil {
			c.d.Prices = map[string]*Prices{}
		}
		c.d.Prices[name] = p
	}
}

// calendar sets l's calendar from nl's period, timezone and anchor, or
// reports what is wrong with them at their line.
func (c *nativeCompiler) calendar(at string, nl nativeLimit, l *bouncer.Limit) bool {
	if nl.cal == 0 {
		switch {
		case nl.TimezoneAt.Line != 0:
			c.errorf(nl.TimezoneAt.Line, "%s.timezone: only a calendar period (calendar_day, calendar_week or calendar_month) has a time zone", at)
			return false
		case nl.AnchorAt.Line != 0:
			c.errorf(nl.AnchorAt.Line, "%s.anchor: only a calendar period (calendar_week or calendar_month) has an anchor", at)
			return false
		}
		return true
	}
	p := calendar.Period{Unit: nl.cal, Zone: nl.Timezone}
	if nl.Anchor != nil {
		p.Anchor = *nl.Anchor
	}
	if l.Algorithm != bouncer.FixedWindow {
		c.errorf(max(nl.AlgorithmAt.Line, nl.At.Line), "%s.algorithm: a %s limit counts in fixed windows: write algorithm: fixed_window, or leave it out (got %s)", at, nl.cal, l.Algorithm)
		return false
	}
	if nl.Timezone != "" {
		if err := (calendar.Period{Unit: nl.cal, Zone: nl.Timezone}).Validate(); err != nil {
			c.errorf(nl.TimezoneAt.Line, "%s.timezone: %s", at, strings.TrimPrefix(err.Error(), "calendar: "))
			return false
		}
	}
	if err := p.Validate(); err != nil {
		c.errorf(max(nl.AnchorAt.Line, nl.At.Line), "%s.anchor: %s", at, strings.TrimPrefix(err.Error(), "calendar: "))
		return false
	}
	l.Calendar, l.Period = p, p.Longest()
	return true
}

// limitMissing says which of a limit's rate and period nl lacks, or "": a
// limit has no default for either, and "must be at least 1, got 0" would
// not say that the field is absent.
func limitMissing(nl nativeLimit) string {
	noRate := (nl.Rate.Kind == 0 || nl.Rate.ShortTag() == "!!null") && nl.Budget.Kind == 0
	noPeriod := nl.Period.Kind == 0
	switch {
	case noRate && noPeriod:
		return "rate and period are required: write the units admitted and the time they are counted over, such as rate: 10, period: 1s"
	case noRate:
		return "rate is required: write the units admitted per period, such as rate: 10"
	case noPeriod:
		return "period is required: write the time the rate is counted over, such as period: 1s, 1m or 1d"
	}
	return ""
}

// mode is the mode of limit l, compiled from nl of rule nr: the limit's
// own, else its rule's (checked once, at the rule), else the load's
// default. The error says why the limit's own names no mode.
func (c *nativeCompiler) mode(nl nativeLimit, nr nativeRule, l bouncer.Limit) (bouncer.Mode, error) {
	switch {
	case nl.Mode != "":
		return bouncer.ParseMode(nl.Mode)
	case nr.Mode != "":
		m, _ := bouncer.ParseMode(nr.Mode)
		return m, nil
	}
	return c.o.defaultMode(l), nil
}

// badAlgorithm says why name is not an algorithm a rule may use, or "".
func (c *nativeCompiler) badAlgorithm(name string) string {
	return algorithmProblem(name, c.o)
}

// wholeRates reads the rate of every limit of f, as decoding does its
// other fields: a rate is a whole number, and a fraction is refused with
// the whole rate over a longer period that says the same (rate: 0.5 per
// 1s is rate: 1, period: 2s).
func wholeRates(file string, f *nativeFile, errs *errorList) {
	each := func(at string, ls []nativeLimit) {
		for j := range ls {
			if reason := readPeriod(&ls[j]); reason != "" {
				errs.add(file, ls[j].Period.Line, fmt.Sprintf("%s.limits[%d].period: %s", at, j, reason))
				continue
			}
			if b := &ls[j].Budget; b.Kind != 0 {
				if ls[j].Rate.Kind != 0 {
					errs.add(file, b.Line, fmt.Sprintf("%s.limits[%d]: a limit has a rate or a budget, not both", at, j))
					continue
				}
				v, err := ParseMoney(b.Value, bouncer.MaxRate)
				if err == nil && v < 1 {
					err = errors.New("want a budget above 0")
				}
				if err != nil || b.Kind != yaml.ScalarNode {
					errs.add(file, b.Line, fmt.Sprintf("%s.limits[%d].budget: %v", at, j, err))
				}
				ls[j].rate = v
				continue
			}
			if reason := wholeRate(&ls[j]); reason != "" {
				errs.add(file, ls[j].Rate.Line, fmt.Sprintf("%s.limits[%d].rate: %s", at, j, reason))
			}
		}
	}
	for i := range f.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		each(at, f.Rules[i].Limits)
		for name, p := range f.Rules[i].Plans {
			each(at+".plans."+name, p.Limits)
		}
	}
}

// readPeriod sets nl.period, or nl.cal for a calendar period, from
// nl.Period, or says why it cannot.
func readPeriod(nl *nativeLimit) string {
	n := &nl.Period
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == 0 || n.ShortTag() == "!!null" {
		return "" // absent: limitMissing says so
	}
	if n.Kind != yaml.ScalarNode {
		return "want a duration such as 1s, 90s, 1h or 7d, or calendar_day, calendar_week or calendar_month"
	}
	if strings.HasPrefix(n.Value, "calendar_") {
		u, err := calendar.ParseUnit(n.Value)
		if err != nil {
			return fmt.Sprintf("unknown calendar period %q: want calendar_day, calendar_week or calendar_month", n.Value)
		}
		nl.cal = u
		return ""
	}
	d, err := yamlconf.ParseDuration(n.Value)
	if err != nil {
		return err.Error() + ", or calendar_day, calendar_week or calendar_month"
	}
	nl.period = d
	return ""
}

// wholeRate sets nl.rate from nl.Rate, or says why it cannot.
func wholeRate(nl *nativeLimit) string {
	n := &nl.Rate
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == 0 || n.ShortTag() == "!!null" {
		return "" // absent: refused by Validate as a rate below 1
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" && n.Decode(&nl.rate) == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!float" {
		if n.Kind == yaml.ScalarNode {
			if hint := rateHint(n.Value); hint != "" {
				return fmt.Sprintf("must be a number, got %q; %s", n.Value, hint)
			}
			return fmt.Sprintf("want a whole number, got %q", n.Value)
		}
		return "want a whole number, got a " + map[yaml.Kind]string{yaml.MappingNode: "mapping", yaml.SequenceNode: "list"}[n.Kind]
	}
	var f float64
	_ = n.Decode(&f)
	reason := "want a whole number, got " + n.Value
	if k := wholeMultiple(f); k > 0 && nl.period > 0 && nl.period <= bouncer.MaxPeriod/time.Duration(k) {
		reason += fmt.Sprintf(": for %s per %s write rate: %d, period: %s", n.Value, periodName(nl.period), int64(math.Round(f*float64(k))), periodName(nl.period*time.Duration(k)))
	}
	return reason
}

// wholeMultiple returns the least k up to 1000 for which f·k is a whole
// number of at least 1, or 0.
func wholeMultiple(f float64) int {
	if !(f > 0) || f > bouncer.MaxRate {
		return 0
	}
	for k := 2; k <= 1000; k++ {
		v := f * float64(k)
		if r := math.Round(v); r >= 1 && math.Abs(v-r) < 1e-9*max(1, r) {
			return k
		}
	}
	return 0
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
