package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
)

// Config is a validated set of rules, immutable once built and safe for
// concurrent use. Load and Parse build one; an Engine serves one at a time
// and swaps in the next atomically.
type Config struct {
	// Version identifies the config's content: the first 12 hex digits
	// of a SHA-256 over its files' names and bytes.
	Version string

	// Files are the files the config was read from, in load order.
	Files []string

	domains map[string]*Domain
}

// Domains returns the config's domains sorted by name.
func (c *Config) Domains() []*Domain {
	out := make([]*Domain, 0, len(c.domains))
	for _, d := range c.domains {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *Domain) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Domain returns the domain named name, or nil.
func (c *Config) Domain(name string) *Domain { return c.domains[name] }

// Semantics says how a domain counts.
type Semantics uint8

const (
	// EnvoySemantics counts as envoyproxy/ratelimit does: each descriptor
	// of a request is charged on its own, over-limit hits included, in
	// fixed windows aligned to the Unix epoch. It is the default for
	// files in that project's format.
	EnvoySemantics Semantics = iota + 1

	// BouncerSemantics decides all descriptors of a request as one
	// all-or-nothing check, with any algorithm; a denied request charges
	// only rules that say charge_denied. It is the only choice for
	// Bouncer's own format.
	BouncerSemantics
)

func (s Semantics) String() string {
	switch s {
	case EnvoySemantics:
		return "envoy"
	case BouncerSemantics:
		return "bouncer"
	}
	return "unknown"
}

// Domain is one domain's rules: the descriptor tree requests are matched
// against.
type Domain struct {
	Name      string
	File      string
	Semantics Semantics
	// EnvoyFormat is set for a domain read from envoyproxy/ratelimit's
	// format, whose users expect that project's defaults (such as no
	// rate-limit headers in RLS answers unless asked).
	EnvoyFormat bool

	// PlanKey is the descriptor entry key whose value names the caller's
	// plan ("" when the domain has no plans); DefaultPlan is the plan of a
	// descriptor that carries none.
	PlanKey     string
	DefaultPlan string

	// Prices are the domain's price tables, by name (see Prices).
	Prices map[string]*Prices

	// AnchorKey is the descriptor entry key whose value, a day of the
	// month (1 to 31) or of the week (1, Monday, to 7), starts the
	// caller's own calendar months or weeks: a billing cycle from the day
	// the customer signed up. "" when the domain has none. Like the plan,
	// it is not part of the key counted.
	AnchorKey string

	// ZoneKey is the descriptor entry key whose value, an IANA time zone,
	// is where the caller's calendar days, weeks and months begin, in
	// place of its limits' timezone; "" when the domain has none. It is
	// not part of the key counted, and must come from a trusted source
	// (a gateway's key table, a verified claim): the zone is part of the
	// limit, and a caller that could change it would start afresh.
	ZoneKey string

	// Rules are the domain's rules in file order.
	Rules []*Rule

	ips    map[string]ipPrefix // entry keys whose values are client IPs
	root   *node
	prices []*Prices // by meter − 1
	custom bool      // a rule has overrides: keys may have runtime limits
}

// Rule is what one matched descriptor is limited by.
type Rule struct {
	// Domain and Path locate the rule: Path is the descriptor entries
	// that lead to it as "key_value.key" (a value is left out where the
	// rule matches any value), as envoyproxy/ratelimit names its stats.
	Domain string
	Path   string

	// Name is the rule's name: a native rule's, or the rate_limit name of
	// an envoyproxy/ratelimit file (used by replaces); it may be empty
	// there.
	Name string

	File string
	Line int

	// Limits are checked together, all or nothing, for a descriptor that
	// names no plan (or a plan the rule does not list).
	Limits []bouncer.Limit

	// Plans are the limits of callers on each named plan.
	Plans map[string]Plan

	// Unlimited rules are never limited: they answer OK with the
	// remaining count at its maximum.
	Unlimited bool

	// Shadow rules decide and report, but never deny a request.
	// QuotaMode is envoyproxy/ratelimit's quota_mode: with envoy
	// semantics, a quota-mode descriptor over its limit answers
	// OVER_LIMIT, and denies the request only when every quota-mode
	// descriptor of it is over; with Bouncer semantics, it is a shadow
	// rule whose over-limit answer carries no duration_until_reset.
	Shadow    bool
	QuotaMode bool

	// Replaces names rules that this one turns off when both match one
	// request (envoyproxy/ratelimit's replaces).
	Replaces []string

	// RefundOn5xx asks a caller that sees the upstream's answer, the
	// gateway, to give the request's units back (Response.Ledger, ending
	// with bouncer.Failed) when it
	// is a 5xx; the service, which never sees the answer, ignores it.
	// Bouncer's format only (refund_on_5xx).
	RefundOn5xx bool

	// Overrides name the limits a key of the rule may have its own rate
	// for, set at runtime (Engine.SetLimits), and its bounds; nil when
	// no key's limits may be changed.
	Overrides map[string]Bounds

	// Prices, when set, prices the rule's units: its limits are budgets
	// in micro-units of Prices.Currency, and a request's usage is charged
	// to them at its model's prices (the config's price).
	Prices *Prices

	// MaxReport is the most one report may charge a descriptor of this
	// rule without deciding (a POST /v1/report descriptor, which is
	// refused above it; an RLQS bucket's reported usage, which is cut to
	// it), so that no single call can put a key deep into debt. 0 means
	// the default: what the rule's limits admit in ReportWindow (a
	// minute), or twice its largest limit's capacity when that is more.
	// Bouncer's format only (max_report).
	MaxReport int64

	// Unit and RequestsPerUnit are the limit as an RLS response reports
	// it (current_limit); Unit is UnitUnknown when the first limit's
	// period is not one of the units.
	Unit            Unit
	RequestsPerUnit uint32

	// zero marks an envoyproxy/ratelimit limit of 0 requests per unit:
	// Limits holds the limit its count is kept under (countLimit), and
	// 0 judges that count.
	zero bool

	// DetailedMetric and ValueToMetric are envoyproxy/ratelimit's metric
	// options: label metrics with the request's values.
	DetailedMetric bool
	ValueToMetric  bool

	// Metadata is the descriptor's metadata (envoyproxy/ratelimit's
	// format, as its main has it): strings, numbers, booleans and nulls
	// in lists and string-keyed mappings. rls.Server.DynamicMetadata
	// sends it back for the descriptors that pass. Read only.
	Metadata map[string]any
}

// Label is how metrics, logs and the admin API name r: its Name, or its
// Path when it has none (an envoyproxy/ratelimit rule without a name).
// Native rules' names are unique in their domain.
func (r *Rule) Label() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Path
}

// Plan is the limits of one plan of a rule.
type Plan struct {
	Limits    []bouncer.Limit
	Unlimited bool
}

// limitsFor returns the limits a descriptor on plan gets, and whether it
// is unlimited.
func (r *Rule) limitsFor(plan string) ([]bouncer.Limit, bool) {
	if p, ok := r.Plans[plan]; ok && plan != "" {
		return p.Limits, p.Unlimited
	}
	return r.Limits, r.Unlimited
}

// Unit is a period as envoyproxy/ratelimit names it.
type Unit uint8

const (
	UnitUnknown Unit = iota
	UnitSecond
	UnitMinute
	UnitHour
	UnitDay
	UnitWeek
	UnitMonth // 30 days, as envoyproxy/ratelimit counts it
	UnitYear  // 365 days
)

var unitNames = [...]string{"unknown", "second", "minute", "hour", "day", "week", "month", "year"}

var unitSeconds = [...]int64{0, 1, 60, 3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400}

func (u Unit) String() string {
	if int(u) < len(unitNames) {
		return unitNames[u]
	}
	return "unknown"
}

// Duration is the unit's length; 0 for UnitUnknown.
func (u Unit) Duration() time.Duration {
	if int(u) < len(unitSeconds) {
		return time.Duration(unitSeconds[u]) * time.Second
	}
	return 0
}

// ParseUnit reads a unit name ("second" … "year") in any case, as
// envoyproxy/ratelimit does.
func ParseUnit(s string) (Unit, bool) {
	i := slices.Index(unitNames[:], strings.ToLower(s))
	if i <= 0 {
		return UnitUnknown, false
	}
	return Unit(i), true
}

// unitOf returns the unit whose length is d, or UnitUnknown.
func unitOf(d time.Duration) Unit {
	for u := UnitSecond; u <= UnitYear; u++ {
		if u.Duration() == d {
			return u
		}
	}
	return UnitUnknown
}

// ipPrefix says how an entry carrying a client IP is aggregated: an
// address becomes its network of the given prefix length, so that one
// client cannot escape a limit by rotating through its IPv6 /64.
type ipPrefix struct{ v4, v6 int }

func (p ipPrefix) apply(value string) string {
	a, err := netip.ParseAddr(value)
	if err != nil {
		return value // not an address: limited as the string it is
	}
	a = a.Unmap()
	bits := p.v6
	if a.Is4() {
		bits = p.v4
	}
	pfx, err := a.Prefix(bits)
	if err != nil {
		return value
	}
	return pfx.String()
}

func version(names []string, data [][]byte) string {
	h := sha256.New()
	for i := range names {
		h.Write([]byte(names[i]))
		h.Write([]byte{0})
		h.Write(data[i])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// FormatDuration writes d the way a config writes a period: "1s", "90s"
// as "1m30s", "1m", "1h", "1d", "7d"; ParseDuration of the config format
// reads it back.
func FormatDuration(d time.Duration) string { return periodName(d) }
