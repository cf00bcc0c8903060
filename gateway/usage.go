package gateway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	// Tokens, instead of Actual, reads the tokens of each kind the
	// upstream states, each "header:<Name>" as Actual reads it: the
	// route's rules that count units are charged their sum, and a rule
	// with a price (rules.Prices) their cost at the model's prices.
	Tokens *Tokens `yaml:"tokens"`

	// Model names the model a rule with a price charges at: "header:<Name>"
	// (a request header), "body:<field>" (a top-level string field of the
	// request's JSON body, such as body:model), or "answer:<Name>" (the
	// upstream's trailer of that name, or its response header). A model
	// known before the request is proxied also prices its reservation;
	// without one a rule reserves at its table's highest price, and
	// charges at its default model's or, without a default, the highest
	// of each kind.
	Model string `yaml:"model"`

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

// Tokens are where the upstream states the tokens of each kind a
// request used; a count it leaves out counts 0.
type Tokens struct {
	Input  string `yaml:"input"`
	Output string `yaml:"output"`
	Cached string `yaml:"cached"`
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
	counts    []field // the response headers or trailers that state the cost: one (actual), or a kind each (tokens)
	bytes     bool

	modelHeader, modelBody string // where the request names its model
	modelAnswer            string // the response header or trailer that names it, canonical

	drainTimeout time.Duration
	drainBytes   int64
}

// field is a count the upstream states: its header or trailer, and what
// it counts.
type field struct {
	name string // canonical
	kind kind
}

type kind uint8

const (
	units kind = iota // actual: the cost itself
	input
	output
	cached
)

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
	case u.Tokens != nil && a != "":
		return nil, fmt.Errorf("actual, tokens: one or the other: a single count, or the tokens of each kind")
	case u.Tokens != nil:
		for _, t := range []struct {
			what, v string
			k       kind
		}{{"input", u.Tokens.Input, input}, {"output", u.Tokens.Output, output}, {"cached", u.Tokens.Cached, cached}} {
			if t.v == "" {
				continue
			}
			name, ok := strings.CutPrefix(t.v, "header:")
			if !ok || name == "" {
				return nil, fmt.Errorf("tokens.%s: %q is not header:<Name>", t.what, t.v)
			}
			m.counts = append(m.counts, field{http.CanonicalHeaderKey(name), t.k})
		}
		if len(m.counts) == 0 {
			return nil, fmt.Errorf("tokens: name at least one of input, output and cached")
		}
	case a == "bytes":
		m.bytes = true
	case strings.HasPrefix(a, "header:") && len(a) > len("header:"):
		m.counts = []field{{http.CanonicalHeaderKey(strings.TrimPrefix(a, "header:")), units}}
	case a == "":
		return nil, fmt.Errorf("actual: required: header:<Name> (a response header or trailer) or bytes; or tokens")
	default:
		return nil, fmt.Errorf("actual: %q is neither header:<Name> nor bytes", a)
	}
	switch mo := u.Model; {
	case mo == "":
	case strings.HasPrefix(mo, "header:") && len(mo) > len("header:"):
		m.modelHeader = http.CanonicalHeaderKey(strings.TrimPrefix(mo, "header:"))
	case strings.HasPrefix(mo, "body:") && len(mo) > len("body:"):
		m.modelBody = strings.TrimPrefix(mo, "body:")
	case strings.HasPrefix(mo, "answer:") && len(mo) > len("answer:"):
		m.modelAnswer = http.CanonicalHeaderKey(strings.TrimPrefix(mo, "answer:"))
	default:
		return nil, fmt.Errorf("model: %q is none of header:<Name>, body:<field> and answer:<Name>", mo)
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

// trailer is the value of h's trailer name: an unannounced trailer keeps
// http.TrailerPrefix; an announced one follows the header's own values,
// of which there were before.
func trailer(h http.Header, name string, before int) (string, bool) {
	for k, vs := range h {
		if t, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && strings.EqualFold(t, name) && len(vs) > 0 {
			return vs[0], true
		}
	}
	if vs := h[name]; len(vs) > before {
		return vs[before], true
	}
	return "", false
}

// model is the model r names, where m reads it before r is proxied: a
// request header, or a field of its JSON body, which it reads whole (the
// route's max_body_bytes bounds it) and puts back. "" when r names none,
// or its body is not a JSON object; an error only for a body over its
// bound.
func (m *meter) model(r *http.Request) (string, error) {
	switch {
	case m.modelHeader != "":
		return r.Header.Get(m.modelHeader), nil
	case m.modelBody == "" || r.Body == nil || r.Body == http.NoBody:
		return "", nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	var fields map[string]json.RawMessage
	var name string
	if json.Unmarshal(body, &fields) != nil || json.Unmarshal(fields[m.modelBody], &name) != nil {
		return "", nil
	}
	return name, nil
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
