package rules

import (
	"fmt"
	"strings"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/yamlconf"
)

// envoyFile is a config file in envoyproxy/ratelimit's format. Every field
// of that format is read; semantics and the rate_limit fields marked
// below are Bouncer's, for files that opt into its semantics.
type envoyFile struct {
	Domain      string            `yaml:"domain"`
	Descriptors []envoyDescriptor `yaml:"descriptors"`
	Semantics   string            `yaml:"semantics"`
}

type envoyDescriptor struct {
	At             pos
	Key            string            `yaml:"key"`
	Value          string            `yaml:"value"`
	RateLimit      *envoyRateLimit   `yaml:"rate_limit"`
	Descriptors    []envoyDescriptor `yaml:"descriptors"`
	ShadowMode     bool              `yaml:"shadow_mode"`
	QuotaMode      bool              `yaml:"quota_mode"`
	DetailedMetric bool              `yaml:"detailed_metric"`
	ValueToMetric  bool              `yaml:"value_to_metric"`
	ShareThreshold bool              `yaml:"share_threshold"`
	Metadata       map[string]any    `yaml:"metadata"`
}

type envoyRateLimit struct {
	At                pos
	RequestsPerUnit   int64  `yaml:"requests_per_unit"`
	RequestsPerUnitAt pos    `yamlconf:"requests_per_unit"`
	Unit              string `yaml:"unit"`
	UnitAt            pos    `yamlconf:"unit"`
	Unlimited         bool   `yaml:"unlimited"`
	Name              string `yaml:"name"`
	Replaces          []struct {
		At   pos
		Name string `yaml:"name"`
	} `yaml:"replaces"`

	// Bouncer's, with semantics: bouncer only.
	Algorithm    string `yaml:"algorithm"`
	Burst        *int64 `yaml:"burst"` // nil: one period's worth
	Shape        bool   `yaml:"shape"`
	OnStoreError string `yaml:"on_store_error"`
	ChargeDenied *bool  `yaml:"charge_denied"`
	Mode         string `yaml:"mode"`
	ModeAt       pos    `yamlconf:"mode"`
}

// compileEnvoy builds a domain from a file in envoyproxy/ratelimit's
// format, with that project's validation and a few more checks.
func compileEnvoy(file string, f *envoyFile, line int, errs *errorList, o LoadOptions) *Domain {
	d := &Domain{File: file, Name: f.Domain, Semantics: EnvoySemantics, EnvoyFormat: true, root: newNode()}
	switch f.Semantics {
	case "", "envoy":
	case "bouncer":
		d.Semantics = BouncerSemantics
	default:
		errs.add(file, line, fmt.Sprintf("semantics: want envoy or bouncer, got %q", f.Semantics))
	}
	if f.Domain == "" {
		errs.add(file, line, "config file cannot have empty domain")
	}
	c := envoyCompiler{file: file, errs: errs, d: d, o: o}
	c.descriptors(d.root, "", "descriptors", f.Descriptors)
	return d
}

type envoyCompiler struct {
	file string
	errs *errorList
	d    *Domain
	o    LoadOptions
}

func (c *envoyCompiler) errorf(line int, format string, args ...any) {
	c.errs.add(c.file, line, fmt.Sprintf(format, args...))
}

// descriptors compiles ds, the descriptors under parent; path is their
// parent's composite key and at their field path in the file.
func (c *envoyCompiler) descriptors(parent *node, path, at string, ds []envoyDescriptor) {
	for i, ed := range ds {
		at := fmt.Sprintf("%s[%d]", at, i)
		if ed.Key == "" {
			c.errorf(ed.At.Line, "descriptor has empty key")
			continue
		}
		step := ed.Key
		if ed.Value != "" {
			step += "_" + ed.Value
		}
		full := step
		if path != "" {
			full = path + "." + step
		}
		n := newNode()
		switch attach(parent, Entry{ed.Key, ed.Value}, ed.Value != "", n) {
		case taken:
			c.errorf(ed.At.Line, "duplicate descriptor composite key '%s.%s'", c.d.Name, full)
			continue
		case shadowed:
			c.errorf(ed.At.Line, "descriptor '%s.%s' is unreachable: every value it matches is matched first by a wildcard of the same key", c.d.Name, full)
			continue
		}
		if ed.ShareThreshold {
			if !isPattern(ed.Value) {
				c.errorf(ed.At.Line, "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", step)
			}
			n.share, n.pattern = true, ed.Value
		}
		if ed.RateLimit != nil {
			n.rule = c.rule(ed, full, at+".rate_limit")
			c.d.Rules = append(c.d.Rules, n.rule)
		}
		c.descriptors(n, full, at+".descriptors", ed.Descriptors)
	}
}

type attached uint8

const (
	added    attached = iota
	taken             // the same key and value are there already
	shadowed          // an earlier wildcard matches all this would
)

// attach adds child under parent for entry e: any value when !hasValue, a
// value pattern when the value has a '*', else the exact value.
// Lookups try patterns in order before any value, so a pattern an earlier
// one covers (a prefix extending an earlier prefix's) could never match,
// nor could any value after a bare "*".
func attach(parent *node, e Entry, hasValue bool, child *node) attached {
	switch {
	case !hasValue:
		if parent.any[e.Key] != nil {
			return taken
		}
		for _, w := range parent.wildcards {
			if w.key == e.Key && w.pattern.isPrefix() && w.pattern.prefix() == "" { // a bare "*"
				return shadowed
			}
		}
		parent.any[e.Key] = child
	case isPattern(e.Value):
		p := newPattern(e.Value)
		for _, w := range parent.wildcards {
			if w.key == e.Key && w.pattern.String() == e.Value {
				return taken
			}
			if w.key == e.Key && w.pattern.covers(p) {
				return shadowed
			}
		}
		if e.Value == "*" && parent.any[e.Key] != nil {
			return shadowed
		}
		parent.wildcards = append(parent.wildcards, wildcard{key: e.Key, pattern: p, next: child})
	default:
		if parent.exact[e] != nil {
			return taken
		}
		parent.exact[e] = child
	}
	return added
}

// rule compiles ed's rate_limit, at is its field path in the file. The
// messages envoyproxy/ratelimit has are kept as it words them; Bouncer's
// own name the field.
func (c *envoyCompiler) rule(ed envoyDescriptor, full, at string) *Rule {
	rl := ed.RateLimit
	r := &Rule{
		Domain: c.d.Name, Path: full, Name: rl.Name, File: c.file, Line: rl.At.Line,
		Unlimited: rl.Unlimited, Shadow: ed.ShadowMode, QuotaMode: ed.QuotaMode,
		DetailedMetric: ed.DetailedMetric, ValueToMetric: ed.ValueToMetric,
		Metadata: ed.Metadata,
	}
	unit, ok := c.unitAndCount(rl, at)
	for _, rp := range rl.Replaces {
		switch rp.Name {
		case "":
			c.errorf(rp.At.Line, "should not have an empty replaces entry")
		case rl.Name:
			c.errorf(rp.At.Line, "replaces should not contain name of same descriptor")
		default:
			r.Replaces = append(r.Replaces, rp.Name)
		}
	}
	r.Unit = unit
	r.RequestsPerUnit = uint32(max(min(rl.RequestsPerUnit, 1<<32-1), 0))
	if rl.Unlimited || !ok {
		return r // reported once above
	}
	l, ok := c.limit(rl, unit, at)
	switch {
	case !ok:
	case l.Rate == 0 && c.d.Semantics == EnvoySemantics:
		// Counted as any other (countLimit) and judged against 0,
		// strict whatever the default: its answers are the window's
		// exact count, every instance's hits included.
		r.Limits, r.zero = []bouncer.Limit{countLimit(unit)}, true
	default:
		if rl.Mode == "" {
			l.Mode = c.o.defaultMode(l)
		}
		if err := l.Validate(); err != nil {
			c.errorf(rl.At.Line, "%s.%s", at, limitReason(err))
			break
		}
		r.Limits = []bouncer.Limit{l}
	}
	return r
}

// unitAndCount checks rl's unit and requests_per_unit, and returns the
// unit; it reports false, having said why, when either is wrong (an
// unlimited rate_limit needs neither).
func (c *envoyCompiler) unitAndCount(rl *envoyRateLimit, at string) (Unit, bool) {
	unit, validUnit := ParseUnit(rl.Unit)
	switch {
	case rl.Unlimited && validUnit:
		c.errorf(rl.At.Line, "should not specify rate limit unit when unlimited")
	case !rl.Unlimited && rl.Unit == "":
		c.errorf(rl.At.Line, "%s.unit: required (or unlimited: true): want %s", at, unitList())
	case !rl.Unlimited && !validUnit:
		reason := fmt.Sprintf("%s.unit: invalid rate limit unit '%s'", at, rl.Unit)
		if near := yamlconf.Suggest(strings.ToLower(rl.Unit), unitNames[UnitSecond:]); near != "" {
			reason += fmt.Sprintf(" (did you mean %s?)", near)
		}
		c.errorf(max(rl.UnitAt.Line, rl.At.Line), "%s; want %s", reason, unitList())
	}
	badCount := rl.RequestsPerUnit < 0 || rl.RequestsPerUnit > 1<<32-1
	if badCount {
		c.errorf(max(rl.RequestsPerUnitAt.Line, rl.At.Line), "%s.requests_per_unit: %d is not between 0 and 4294967295", at, rl.RequestsPerUnit)
	}
	return unit, validUnit && !badCount
}

// limit is the limit rl sets: a fixed window of its unit, with what
// 'semantics: bouncer' adds (algorithm, burst, shape, charge_denied,
// on_store_error, mode). It reports false, having said why, when one of those
// is wrong or the semantics do not allow them.
func (c *envoyCompiler) limit(rl *envoyRateLimit, unit Unit, at string) (bouncer.Limit, bool) {
	l := bouncer.Limit{
		Name:         limitName(rl.Name, unit),
		Algorithm:    bouncer.FixedWindow,
		Rate:         rl.RequestsPerUnit,
		Period:       unit.Duration(),
		ChargeDenied: c.d.Semantics == EnvoySemantics,
	}
	bouncerOnly := rl.Algorithm != "" || rl.Burst != nil || rl.Shape || rl.OnStoreError != "" || rl.ChargeDenied != nil || rl.Mode != ""
	if !bouncerOnly {
		return l, true
	}
	if c.d.Semantics != BouncerSemantics {
		c.errorf(rl.At.Line, "algorithm, burst, shape, on_store_error, charge_denied and mode need 'semantics: bouncer' at the top of the file")
		return l, false
	}
	if rl.Algorithm != "" {
		if reason := algorithmProblem(rl.Algorithm, c.o); reason != "" {
			c.errorf(rl.At.Line, "algorithm: %s", reason)
			return l, false
		}
		l.Algorithm, _ = bouncer.ParseAlgorithm(rl.Algorithm)
	}
	l.Shape = rl.Shape
	switch {
	case rl.Burst != nil:
		l.Burst = *rl.Burst // burst: 0 is refused as the library refuses it
	case l.Algorithm.UsesBurst():
		l.Burst = l.Rate
	}
	if rl.ChargeDenied != nil {
		l.ChargeDenied = *rl.ChargeDenied
	}
	if rl.OnStoreError != "" {
		p, err := bouncer.ParseStoreErrorPolicy(rl.OnStoreError)
		if err != nil {
			c.errorf(rl.At.Line, "%s.on_store_error: %s", at, strings.TrimPrefix(err.Error(), "bouncer: "))
			return l, false
		}
		l.OnStoreError = p
	}
	m, err := bouncer.ParseMode(rl.Mode)
	if err != nil {
		c.errorf(max(rl.ModeAt.Line, rl.At.Line), "%s.mode: %v", at, err)
		return l, false
	}
	l.Mode = m
	return l, true
}

// unitList is the valid units, for a message: "second, minute, hour,
// day, week, month or year".
func unitList() string {
	us := unitNames[UnitSecond:]
	return strings.Join(us[:len(us)-1], ", ") + " or " + us[len(us)-1]
}

// limitName names the limit of an envoyproxy/ratelimit rule: its
// rate_limit name, or its unit ("per_minute").
func limitName(name string, u Unit) string {
	if name != "" {
		return name
	}
	return "per_" + u.String()
}
