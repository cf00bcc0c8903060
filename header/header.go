// Package header is the one place that writes rate-limit response
// headers: the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers), the X-RateLimit-* fields many
// clients read, and Retry-After.
package header

import (
	"math"
	"strconv"
	"strings"
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

// Values describe the binding limit of an answer.
type Values struct {
	Policy    string        // the limit's name
	Limit     int64         // its quota per window
	Window    time.Duration // its window (period)
	Remaining int64
	Reset     time.Duration // until the quota is full again
	Denied    bool
	// RetryAfter, for a denied answer, is how long until the same request
	// would pass; math.MaxInt64 (bouncer.Never) writes no Retry-After,
	// since no wait would help.
	RetryAfter time.Duration
}

// Append appends v's headers under mode to dst. Durations are written as
// whole seconds, rounded up so that a client waiting that long is never
// early. Retry-After is written for every denied answer whatever the
// mode.
func (v Values) Append(dst []Field, mode Mode) []Field {
	if mode&IETF != 0 {
		p := policyOf(v)
		dst = append(dst,
			Field{"RateLimit-Policy", p.policy, true},
			Field{"RateLimit", p.name + ";r=" + itoa(v.Remaining) + ";t=" + itoa(Seconds(v.Reset)), false},
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

type policyKey struct {
	name          string
	limit, window int64
}

type policy struct{ name, policy string }

// policies caches the policy fields of the limits seen (bounded), since
// they are the same in every answer under a limit.
var (
	policies     sync.Map // policyKey → policy
	policiesSeen atomic.Int64
)

func policyOf(v Values) policy {
	k := policyKey{v.Policy, v.Limit, Seconds(v.Window)}
	if p, ok := policies.Load(k); ok {
		return p.(policy)
	}
	name := sfString(v.Policy)
	p := policy{name, name + ";q=" + itoa(v.Limit) + ";w=" + itoa(k.window)}
	if policiesSeen.Load() < 1<<14 {
		if _, loaded := policies.LoadOrStore(k, p); !loaded {
			policiesSeen.Add(1)
		}
	}
	return p
}

// Seconds is d in whole seconds, rounded up; never negative.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// sfString writes s as a structured-field string (RFC 9651): quoted, with
// '"' and '\' escaped and anything outside printable ASCII replaced, so
// that no limit name can break the header.
func sfString(s string) string {
	if s == "" {
		s = "default"
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := range len(s) {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('_')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
