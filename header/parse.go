package header

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Policy is one member of a RateLimit-Policy field: a quota policy of the
// server.
type Policy struct {
	Name         string
	Quota        int64         // q: the quota, in QuotaUnit
	Window       time.Duration // w, whole seconds; 0 when the field has none
	QuotaUnit    string        // qu; DefaultQuotaUnit when the field has none
	PartitionKey []byte        // pk; nil when the field has none
}

// Item is one member of a RateLimit field: the service limit left under
// the policy Name.
type Item struct {
	Name         string
	Remaining    int64         // r: the quota still available
	Reset        time.Duration // t, whole seconds: the window in which Remaining may be used
	PartitionKey []byte        // pk; nil when the field has none
	// HasRemaining and HasReset report whether the field had r and t.
	// The draft requires r; a member without it is still returned, so
	// that a client sees which policy the server names.
	HasRemaining, HasReset bool
}

// ParsePolicies parses the RateLimit-Policy field, every line of it as
// http.Header.Values returns them: the lines form one list. A field that
// is not a valid structured-field list yields nothing. A member is left
// out if its name is not a string (or a token, which earlier drafts
// allowed), if q is missing or not a non-negative integer, if w is not a
// positive integer, qu not a non-empty string or token, or pk not a byte
// sequence; other parameters are ignored. A window too long for a
// time.Duration reads as math.MaxInt64.
func ParsePolicies(fields []string) []Policy {
	ms, ok := parseList(fields)
	if !ok {
		return nil
	}
	var out []Policy
	for _, m := range ms {
		if p, ok := policyFrom(m); ok {
			out = append(out, p)
		}
	}
	return out
}

func policyFrom(m member) (Policy, bool) {
	name, ok := name(m)
	if !ok {
		return Policy{}, false
	}
	p := Policy{Name: name, QuotaUnit: DefaultQuotaUnit}
	quota := false
	for _, pr := range m.params {
		v := pr.value
		switch pr.key {
		case "q":
			if v.kind != kindInteger || v.n < 0 {
				return Policy{}, false
			}
			p.Quota, quota = v.n, true
		case "w":
			if v.kind != kindInteger || v.n <= 0 {
				return Policy{}, false
			}
			p.Window = seconds(v.n)
		case "qu":
			if v.kind != kindString && v.kind != kindToken || v.s == "" {
				return Policy{}, false
			}
			p.QuotaUnit = v.s
		case "pk":
			if p.PartitionKey, ok = partitionKey(v); !ok {
				return Policy{}, false
			}
		}
	}
	return p, quota
}

// ParseRateLimit parses the RateLimit field, every line of it as
// http.Header.Values returns them: the lines form one list. A field that
// is not a valid structured-field list yields nothing. A member is left
// out if its name is not a string (or a token), if r or t is not a
// non-negative integer, or pk not a byte sequence; other parameters are
// ignored. A reset too long for a time.Duration reads as math.MaxInt64.
func ParseRateLimit(fields []string) []Item {
	ms, ok := parseList(fields)
	if !ok {
		return nil
	}
	var out []Item
	for _, m := range ms {
		if it, ok := itemFrom(m); ok {
			out = append(out, it)
		}
	}
	return out
}

func itemFrom(m member) (Item, bool) {
	name, ok := name(m)
	if !ok {
		return Item{}, false
	}
	it := Item{Name: name}
	for _, pr := range m.params {
		v := pr.value
		switch pr.key {
		case "r":
			if v.kind != kindInteger || v.n < 0 {
				return Item{}, false
			}
			it.Remaining, it.HasRemaining = v.n, true
		case "t":
			if v.kind != kindInteger || v.n < 0 {
				return Item{}, false
			}
			it.Reset, it.HasReset = seconds(v.n), true
		case "pk":
			if it.PartitionKey, ok = partitionKey(v); !ok {
				return Item{}, false
			}
		}
	}
	return it, true
}

// name is the policy name of a member: draft-11 makes it a string;
// earlier drafts allowed a token, which is read too.
func name(m member) (string, bool) {
	if m.inner || m.item.kind != kindString && m.item.kind != kindToken {
		return "", false
	}
	return m.item.s, true
}

func partitionKey(v bareItem) ([]byte, bool) {
	if v.kind != kindBytes {
		return nil, false
	}
	if len(v.b) == 0 {
		return nil, true
	}
	return v.b, true
}

// seconds is n seconds, or math.MaxInt64 if that is longer than a
// time.Duration holds.
func seconds(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

// ParseRetryAfter parses a Retry-After value: delay-seconds, or an
// HTTP-date (any form http.ParseTime reads) taken relative to now, a date
// already past giving 0. It reports false for anything else, a negative
// number included. A delay too long for a time.Duration reads as
// math.MaxInt64; a client should still cap what it is willing to wait.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.Trim(v, " \t")
	if n, ok := delaySeconds(v); ok {
		return n, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// delaySeconds parses 1*DIGIT seconds, saturating.
func delaySeconds(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	for i := range len(v) {
		if !isDigit(v[i]) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil { // only a value out of range gets here
		return math.MaxInt64, true
	}
	return seconds(n), true
}

// Legacy is what the X-RateLimit-* fields say.
type Legacy struct {
	Limit, Remaining int64
	Reset            time.Duration
}

// ParseLegacy parses X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset, each a non-negative integer (the first line of
// each is read). It reports false when X-RateLimit-Remaining is missing,
// or any of the three is present but malformed; Limit and Reset are 0
// when absent.
//
// Reset is read as delta seconds, as Bouncer writes it, unless it is
// above 1e9 (about 31.7 years): then it is a Unix time, as GitHub's API
// and others write it, and Reset is the time from the response's Date
// field to it (0 if already past). Without a valid Date field such a
// Reset cannot be placed and is 0. Reading no clock keeps the result a
// function of the response alone; every server with a clock sends Date.
func ParseLegacy(h http.Header) (Legacy, bool) {
	var l Legacy
	var ok bool
	if l.Remaining, ok = legacyInt(h, "X-RateLimit-Remaining"); !ok || h.Get("X-RateLimit-Remaining") == "" {
		return Legacy{}, false
	}
	if l.Limit, ok = legacyInt(h, "X-RateLimit-Limit"); !ok {
		return Legacy{}, false
	}
	reset, ok := legacyInt(h, "X-RateLimit-Reset")
	if !ok {
		return Legacy{}, false
	}
	switch {
	case reset <= 1e9:
		l.Reset = seconds(reset)
	default:
		if date, err := http.ParseTime(h.Get("Date")); err == nil {
			// Capped (at year 36812) so that time.Unix cannot overflow.
			l.Reset = max(time.Unix(min(reset, 1<<40), 0).Sub(date), 0)
		}
	}
	return l, true
}

// legacyInt parses the first line of h's field name as a non-negative
// integer; an absent field is 0, and ok.
func legacyInt(h http.Header, name string) (int64, bool) {
	v := strings.Trim(h.Get(name), " \t")
	if v == "" {
		return 0, len(h.Values(name)) == 0
	}
	for i := range len(v) {
		if !isDigit(v[i]) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}
