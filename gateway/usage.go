package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Usage meters a route's limits in a cost known only once the upstream
// has answered: the tokens an LLM used, the bytes a download sent. A
// request reserves Estimate from each of the route's descriptors before
// it is proxied, and is settled at Actual once the upstream's answer has
// been relayed (for a stream, at its end): the rest is charged, past the
// limits if need be (a debt that later requests are refused until time
// pays it back), or what was not used is given back. A request refused
// up front is never settled.
type Usage struct {
	// Estimate is what a request reserves: a count ("500"),
	// "header:<Name>" (the count the request's header states; 1 when it
	// states none; a value that is not a count is answered 400), or
	// "body_size" (the request's Content-Length; 1 when it states none).
	// "" reserves 1; an estimate below 1 reserves 1, so that a client in
	// debt is refused whatever it claims.
	Estimate string `yaml:"estimate"`

	// Actual is what the request cost: "header:<Name>" (the upstream's
	// trailer of that name, or, if it sends none, its response header),
	// or "bytes" (the response body bytes relayed to the client). A
	// response without a valid count keeps its estimate.
	Actual string `yaml:"actual"`
}

// meter is a route's Usage, parsed.
type meter struct {
	fixed     int64  // the estimate, when it is a count
	estHeader string // the request header that states the estimate
	bodySize  bool
	actHeader string // the response header or trailer that states the cost
	bytes     bool
}

// parse reads u.
func (u *Usage) parse() (*meter, error) {
	m := &meter{fixed: 1}
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
		m.fixed = max(n, 1)
	}
	switch a := u.Actual; {
	case a == "bytes":
		m.bytes = true
	case strings.HasPrefix(a, "header:") && len(a) > len("header:"):
		m.actHeader = strings.TrimPrefix(a, "header:")
	case a == "":
		return nil, fmt.Errorf("actual: required: header:<Name> (a response header or trailer) or bytes")
	default:
		return nil, fmt.Errorf("actual: %q is neither header:<Name> nor bytes", a)
	}
	return m, nil
}

// estimate is what r reserves; an error is the client's.
func (m *meter) estimate(r *http.Request) (int64, error) {
	switch {
	case m.bodySize:
		return max(r.ContentLength, 1), nil
	case m.estHeader != "":
		v := r.Header.Get(m.estHeader)
		if v == "" {
			return 1, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("the request's %s, %q, is not a count", m.estHeader, v)
		}
		return max(n, 1), nil
	}
	return m.fixed, nil
}

// actual is what the request cost, from the answer sw relayed.
func (m *meter) actual(sw *statusWriter) (int64, bool) {
	if m.bytes {
		return sw.bytes, true
	}
	h := sw.Header()
	v := ""
	for k, vs := range h {
		// A trailer the upstream did not announce keeps its prefix.
		if t, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && strings.EqualFold(t, m.actHeader) && len(vs) > 0 {
			v = vs[0]
		}
	}
	if v == "" {
		v = h.Get(m.actHeader)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// Settle settles what Decide reserved at the request's actual cost.
func (a *admitted) Settle(ctx context.Context, actual func(int) (int64, bool)) {
	n, ok := actual(0)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.engine.Settle(context.WithoutCancel(ctx), &a.resp, n); err != nil {
		a.log.Warn("settle failed", "actual", n, "err", err)
	}
}
