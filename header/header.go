package header

import (
	"encoding/base64"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Mode selects which headers are written.
type Mode uint8

const (
	IETF       Mode = 1 << iota // RateLimit-Policy and RateLimit
	XRateLimit                  // X-RateLimit-Limit, -Remaining, -Reset
	Off        Mode = 0
	All             = IETF | XRateLimit
)

// ParseMode reads "all", "ietf", "x-ratelimit" or "off".
func ParseMode(s string) (Mode, bool) {
	switch s {
	case "all":
		return All, true
	case "ietf":
		return IETF, true
	case "x-ratelimit":
		return XRateLimit, true
	case "off", "none":
		return Off, true
	}
	return Off, false
}

// Field is one header. Constant marks a field that is the same in every
// answer under one limit (its policy, its quota), which a transport may
// build once and reuse.
type Field struct {
	Name, Value string
	Constant    bool
}

// DefaultQuotaUnit is the quota unit of a policy that names none.
const DefaultQuotaUnit = "requests"

// Values describe the binding limit of an answer. ForLimit and Decided
// fill them from a limit and its decision, as every writer of Bouncer
// does, so that each field means one thing for every algorithm.
type Values struct {
	Policy    string        // the limit's name; "default" if empty
	Limit     int64         // its quota: the units allotted per Window (q)
	Window    time.Duration // the time over which Limit is allotted (w); 0 writes no w
	Remaining int64         // what Limit still admits now (r); at most Limit
	Reset     time.Duration // until the quota is full again (t); at most Window
	Denied    bool
	// RetryAfter, for a denied answer, is how long until the same request
	// would pass; math.MaxInt64 (bouncer.Never) writes no Retry-After,
	// since no wait would help.
	RetryAfter time.Duration

	// QuotaUnit is what Limit counts: "requests" (DefaultQuotaUnit, also
	// when empty, and then not written), "content-bytes" or
	// "concurrent-requests".
	QuotaUnit string
	// PartitionKey, if not empty, is written as the pk parameter of both
	// IETF fields: which partition of the limit (whose quota) the answer
	// describes. It goes to the client: it should not hold what the
	// client may not see, such as another tenant's identifier.
	PartitionKey []byte

	prepared *policy // see Prepare
}

// Prepare returns v holding the fields that are the same in every answer
// under its limit (its policy, its quota), built once: a Values copied
// from a prepared one, with only Remaining, Reset, Denied and RetryAfter
// changed, writes its fields without looking them up. A copy whose other
// fields changed is looked up as any Values is.
func (v Values) Prepare() Values {
	v.prepared = nil
	p := policyOf(v)
	p.key = policyKey{v.Policy, v.QuotaUnit, v.Limit, Seconds(v.Window)}
	v.prepared = &p
	return v
}

// Append appends v's headers under mode to dst. Durations are written as
// whole seconds, rounded up so that a client waiting that long is never
// early. Retry-After is written for every denied answer whatever the
// mode. Integers are clamped to what a structured field can carry
// (0 to 999,999,999,999,999), and bytes of the policy name outside
// printable ASCII are written as '_'. Append is safe for concurrent use.
func (v Values) Append(dst []Field, mode Mode) []Field {
	if mode&IETF != 0 {
		p := policyOf(v)
		it := Item{Remaining: v.Remaining, Reset: v.Reset, PartitionKey: v.PartitionKey, HasRemaining: true, HasReset: true}
		var buf [128]byte
		dst = append(dst,
			Field{"RateLimit-Policy", p.field, p.constant},
			Field{"RateLimit", string(appendItem(buf[:0], p.name, it)), false},
		)
	}
	if mode&XRateLimit != 0 {
		dst = append(dst,
			Field{"X-RateLimit-Limit", itoa(v.Limit), true},
			Field{"X-RateLimit-Remaining", itoa(v.Remaining), false},
			Field{"X-RateLimit-Reset", itoa(Seconds(v.Reset)), false},
		)
	}
	if v.Denied && v.RetryAfter != math.MaxInt64 {
		dst = append(dst, Field{"Retry-After", itoa(max(Seconds(v.RetryAfter), 1)), false})
	}
	return dst
}

// Set sets v's headers under mode in h, the fields Append lists,
// replacing any of the same names. It is Append for a net/http response,
// at a few allocations: it writes the canonical names without computing
// them, and the fields that are the same in every answer under a limit
// (RateLimit-Policy, X-RateLimit-Limit) as slices built once and shared
// by every header it sets, which callers must not modify in place (as
// net/http never does; h.Set and h.Add replace or copy them).
func (v Values) Set(h http.Header, mode Mode) {
	if mode&(IETF|XRateLimit) == 0 {
		if v.Denied && v.RetryAfter != math.MaxInt64 {
			h["Retry-After"] = []string{itoa(max(Seconds(v.RetryAfter), 1))}
		}
		return
	}
	p := policyOf(v)
	vals := make([]string, 4)
	if mode&IETF != 0 {
		it := Item{Remaining: v.Remaining, Reset: v.Reset, PartitionKey: v.PartitionKey, HasRemaining: true, HasReset: true}
		var buf [128]byte
		vals[0] = string(appendItem(buf[:0], p.name, it))
		h["Ratelimit-Policy"] = p.fieldValues
		h["Ratelimit"] = vals[0:1:1]
	}
	if mode&XRateLimit != 0 {
		vals[1], vals[2] = itoa(v.Remaining), itoa(Seconds(v.Reset))
		h["X-Ratelimit-Limit"] = p.limitValues
		h["X-Ratelimit-Remaining"] = vals[1:2:2]
		h["X-Ratelimit-Reset"] = vals[2:3:3]
	}
	if v.Denied && v.RetryAfter != math.MaxInt64 {
		vals[3] = itoa(max(Seconds(v.RetryAfter), 1))
		h["Retry-After"] = vals[3:4:4]
	}
}

// policyName is the name v's fields give its policy.
func (v Values) policyName() string {
	if v.Policy == "" {
		return "default"
	}
	return v.Policy
}

func (v Values) policy() Policy {
	return Policy{Name: v.policyName(), Quota: v.Limit, Window: v.Window, QuotaUnit: v.QuotaUnit, PartitionKey: v.PartitionKey}
}

type policyKey struct {
	name, unit    string
	limit, window int64
}

type policy struct {
	name     string // quoted
	field    string // the RateLimit-Policy member
	constant bool

	// For Values.Set: the field, and X-RateLimit-Limit's value, as
	// header values.
	fieldValues, limitValues []string

	key policyKey // what it was built for, if cached
}

// policies caches the policy fields of the limits seen (bounded), since
// they are the same in every answer under a limit. A field with a
// partition key is not cached: its key differs from one client to the
// next, so it would fill the cache with fields that never repeat.
var (
	policies     sync.Map // policyKey → policy
	policiesSeen atomic.Int64
)

const maxPolicies = 1 << 14

func policyOf(v Values) policy {
	if p := v.prepared; p != nil && len(v.PartitionKey) == 0 && p.key == (policyKey{v.Policy, v.QuotaUnit, v.Limit, Seconds(v.Window)}) {
		return *p
	}
	if len(v.PartitionKey) > 0 {
		return buildPolicy(v.policy(), false)
	}
	k := policyKey{v.Policy, v.QuotaUnit, v.Limit, Seconds(v.Window)}
	if p, ok := policies.Load(k); ok {
		return p.(policy)
	}
	p := buildPolicy(v.policy(), true)
	p.key = k
	if policiesSeen.Load() < maxPolicies {
		if _, loaded := policies.LoadOrStore(k, p); !loaded {
			policiesSeen.Add(1)
		}
	}
	return p
}

func buildPolicy(p Policy, constant bool) policy {
	name := string(appendString(nil, p.Name))
	field := string(appendPolicy([]byte(name), p))
	return policy{name: name, field: field, constant: constant, fieldValues: []string{field}, limitValues: []string{itoa(p.Quota)}}
}

// Seconds is d in whole seconds, rounded up; never negative.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// String writes p as a member of a RateLimit-Policy field:
// "name";q=100;w=60, with qu when QuotaUnit is neither empty nor
// "requests", w when Window is at least 1 ns (whole seconds, rounded
// up), pk when PartitionKey is not empty. Integers are clamped and name
// bytes outside printable ASCII written as '_', as by Values.Append.
func (p Policy) String() string {
	return string(appendPolicy(appendString(nil, p.Name), p))
}

// String writes it as a member of a RateLimit field: "name";r=5;t=30,
// with r only if HasRemaining, t only if HasReset (whole seconds, rounded
// up), pk when PartitionKey is not empty.
func (it Item) String() string {
	return string(appendItem(appendString(nil, it.Name), "", it))
}

// appendPolicy appends p's parameters to b, which ends with p's name.
func appendPolicy(b []byte, p Policy) []byte {
	b = append(b, ";q="...)
	b = appendInt(b, p.Quota)
	if p.QuotaUnit != "" && p.QuotaUnit != DefaultQuotaUnit {
		b = append(b, ";qu="...)
		b = appendString(b, p.QuotaUnit)
	}
	if w := Seconds(p.Window); w > 0 {
		b = append(b, ";w="...)
		b = appendInt(b, w)
	}
	return appendKey(b, p.PartitionKey)
}

// appendItem appends name, quoted, and it's parameters to b.
func appendItem(b []byte, name string, it Item) []byte {
	b = append(b, name...)
	if it.HasRemaining {
		b = append(b, ";r="...)
		b = appendInt(b, it.Remaining)
	}
	if it.HasReset {
		b = append(b, ";t="...)
		b = appendInt(b, Seconds(it.Reset))
	}
	return appendKey(b, it.PartitionKey)
}

func appendKey(b, key []byte) []byte {
	if len(key) == 0 {
		return b
	}
	b = append(b, ";pk=:"...)
	b = base64.StdEncoding.AppendEncode(b, key)
	return append(b, ':')
}

// maxInteger is the largest integer of a structured field (15 digits).
const maxInteger = 999_999_999_999_999

func appendInt(b []byte, n int64) []byte {
	return strconv.AppendInt(b, min(max(n, 0), maxInteger), 10)
}

// appendString appends s as a structured-field string (RFC 9651): quoted,
// with '"' and '\' escaped and anything outside printable ASCII replaced,
// so that no name can break the header.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := range len(s) {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '_')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
