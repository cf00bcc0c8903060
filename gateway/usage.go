package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

// Usage meters a route's limits in a cost known only once the upstream
// has answered: the tokens an LLM used, the bytes a download sent. A
// request reserves Estimate from each of the route's descriptors before
// it is proxied, and is settled at Actual once the upstream's answer has
// been relayed (for a stream, at its end), or once its client has gone:
// the rest is charged, past the limits if need be (a debt that later
// requests are refused until time pays it back), or what was not used
// is given back. A request refused up front is never settled, and one
// whose client goes away before any answer keeps its estimate.
type Usage struct {
	// Estimate is what a request reserves: a count ("500"),
	// "header:<Name>" (the count the request's header states; 1 when it
	// states none; a value that is not a count, or is over
	// rules.MaxHits, is answered 400), or "body_size" (the request's
	// Content-Length; 1 when it states none). "" reserves 1; an estimate
	// below 1 reserves 1, so that a client in debt is refused whatever
	// it claims.
	Estimate string `yaml:"estimate"`

	// Actual is what the request cost: "header:<Name>" (the upstream's
	// trailer of that name, or, if it sends none, its response header),
	// or "bytes" (the response body bytes relayed to the client, until
	// the client goes away). A response without a valid count keeps its
	// estimate.
	Actual string `yaml:"actual"`

	// DrainTimeout and DrainBytes bound the drain: when the client of a
	// request whose count is still to come (in a trailer, or with no
	// count in the response header) goes away mid-answer, the gateway
	// reads the rest of the upstream's answer, discarding it, for at
	// most DrainTimeout and DrainBytes, to learn the count. Past either
	// bound it stops reading and the request is charged as an answer
	// without its trailer. Zero means DefaultDrainTimeout and
	// DefaultDrainBytes; neither applies to "bytes".
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	DrainBytes   int64         `yaml:"drain_bytes"`
}

// The drain's bounds when a Usage sets none: what a completion that its
// client left takes to end, and its size, with room to spare.
const (
	DefaultDrainTimeout = 10 * time.Second
	DefaultDrainBytes   = 1 << 20
)

// meter is a route's Usage, parsed.
type meter struct {
	fixed     int64  // the estimate, when it is a count
	estHeader string // the request header that states the estimate
	bodySize  bool
	actHeader string // the response header or trailer that states the cost, canonical
	bytes     bool

	drainTimeout time.Duration
	drainBytes   int64
}

// parse reads u.
func (u *Usage) parse() (*meter, error) {
	m := &meter{fixed: 1, drainTimeout: cmp.Or(u.DrainTimeout, DefaultDrainTimeout), drainBytes: cmp.Or(u.DrainBytes, DefaultDrainBytes)}
	switch e := u.Estimate; {
	case e == "":
	case e == "body_size":
		m.bodySize = true
	case strings.HasPrefix(e, "header:"):
		m.estHeader = http.CanonicalHeaderKey(strings.TrimPrefix(e, "header:"))
		if m.estHeader == "" {
			return nil, fmt.Errorf("estimate: %q names no header", e)
		}
	default:
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("estimate: %q is none of a count, header:<Name> and body_size", e)
		}
		if n > rules.MaxHits {
			return nil, fmt.Errorf("estimate: %d is over %d, the most a check takes", n, int64(rules.MaxHits))
		}
		m.fixed = max(n, 1)
	}
	switch a := u.Actual; {
	case a == "bytes":
		m.bytes = true
	case strings.HasPrefix(a, "header:") && len(a) > len("header:"):
		m.actHeader = http.CanonicalHeaderKey(strings.TrimPrefix(a, "header:"))
	case a == "":
		return nil, fmt.Errorf("actual: required: header:<Name> (a response header or trailer) or bytes")
	default:
		return nil, fmt.Errorf("actual: %q is neither header:<Name> nor bytes", a)
	}
	switch {
	case u.DrainTimeout < 0:
		return nil, fmt.Errorf("drain_timeout: %v is negative", u.DrainTimeout)
	case u.DrainBytes < 0:
		return nil, fmt.Errorf("drain_bytes: %d is negative", u.DrainBytes)
	case m.bytes && (u.DrainTimeout != 0 || u.DrainBytes != 0):
		return nil, fmt.Errorf("drain_timeout, drain_bytes: only for actual: header:<Name>; bytes are counted as they are relayed")
	}
	return m, nil
}

// estimate is what r reserves; an error is the client's.
func (m *meter) estimate(r *http.Request) (int64, error) {
	n, what := m.fixed, ""
	switch {
	case m.bodySize:
		n, what = r.ContentLength, "Content-Length"
	case m.estHeader != "":
		v := r.Header.Get(m.estHeader)
		if v == "" {
			return 1, nil
		}
		var err error
		n, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if errors.Is(err, strconv.ErrRange) && n > 0 {
			return 0, fmt.Errorf("the request's %s, %q, is over the bound: at most %d", m.estHeader, v, int64(rules.MaxHits))
		}
		if err != nil || n < 0 {
			return 0, fmt.Errorf("the request's %s, %q, is not a count", m.estHeader, v)
		}
		what = m.estHeader
	}
	if n > rules.MaxHits {
		return 0, fmt.Errorf("the request's %s, %d, is over the bound: at most %d", what, n, int64(rules.MaxHits))
	}
	return max(n, 1), nil
}

// count reads a count the upstream states.
func count(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n, err == nil && n >= 0
}

// trailer is the count in h's trailer of m's header: an unannounced
// trailer keeps http.TrailerPrefix; an announced one follows the header's
// own values, of which there were before.
func (m *meter) trailer(h http.Header, before int) (int64, bool) {
	for k, vs := range h {
		if t, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && strings.EqualFold(t, m.actHeader) && len(vs) > 0 {
			return count(vs[0])
		}
	}
	if vs := h[m.actHeader]; len(vs) > before {
		return count(vs[before])
	}
	return 0, false
}

// announced reports whether h announces a trailer named name.
func announced(h http.Header, name string) bool {
	for _, v := range h["Trailer"] {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), name) {
				return true
			}
		}
	}
	return false
}
