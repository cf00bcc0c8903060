package httplimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Usage meters a rule in what requests consume when that is known only
// once the response is written: the tokens an LLM used, the bytes a
// download sent. A request reserves Estimate from the rule's limits
// before the handler runs, and is settled at Actual once the handler has
// returned: the rest is charged, past the limits if need be (a debt that
// later requests are refused until time pays it back), or what was not
// used is given back. A request refused up front is never settled, and a
// handler that panics leaves its estimate charged.
//
// Charging the rest needs a limiter that implements store.Charger (the
// stores do); with one that does not, only the unused part is given back,
// and the failure to charge is logged.
type Usage struct {
	// Estimate is what a request reserves before it is served:
	// EstimateCost, EstimateHeader and EstimateBody build common ones. Nil
	// reserves 1. An estimate below 1 reserves 1, so that a client in debt
	// is refused whatever it claims. An error answers the request 400 (an
	// invalid_request through Options.OnError if set): the client's fault.
	Estimate func(r *http.Request) (int64, error)

	// Actual is what the request cost, from the response the handler
	// wrote: ActualHeader and ActualBytes build common ones. ok false
	// leaves the estimate charged. Nil settles nothing: the estimate is
	// the cost.
	Actual func(r *http.Request, resp *Response) (cost int64, ok bool)
}

// Response is what a handler answered, for Usage.Actual.
type Response struct {
	// Status is the status written; 200 if the handler wrote none.
	Status int

	// Header is the header as the handler left it, trailers included
	// (named in a Trailer header, or with http.TrailerPrefix).
	Header http.Header

	// Bytes counts the body bytes the handler wrote.
	Bytes int64
}

// EstimateCost reserves n for every request.
func EstimateCost(n int64) func(*http.Request) (int64, error) {
	return func(*http.Request) (int64, error) { return n, nil }
}

// EstimateHeader reserves the count a request states in its header
// name, such as X-Estimated-Tokens; 1 when it states none. A value that
// is not a count is an error. Clients choose the value: the settle
// charges what they really used, whatever they stated.
func EstimateHeader(name string) func(*http.Request) (int64, error) {
	return func(r *http.Request) (int64, error) {
		v := r.Header.Get(name)
		if v == "" {
			return 1, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("header %s: %q is not a count", name, v)
		}
		return n, nil
	}
}

// EstimateBody reserves the size of a request's body as its
// Content-Length states it; 1 when it states none.
func EstimateBody(r *http.Request) (int64, error) {
	return max(r.ContentLength, 1), nil
}

// ActualHeader reads the cost from the response's trailer name, or, if
// there is none, its header name, such as X-Usage-Tokens: what the
// handler reports it used. A response without a valid count keeps its
// estimate.
func ActualHeader(name string) func(*http.Request, *Response) (int64, bool) {
	return func(_ *http.Request, resp *Response) (int64, bool) {
		v := trailer(resp.Header, name)
		if v == "" {
			v = resp.Header.Get(name)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		return n, true
	}
}

// ActualBytes reads the cost from the body bytes the handler wrote.
func ActualBytes(_ *http.Request, resp *Response) (int64, bool) {
	return resp.Bytes, true
}

// trailer is the value of h's trailer name set with http.TrailerPrefix,
// whose keys net/http leaves as written.
func trailer(h http.Header, name string) string {
	for k, vs := range h {
		if t, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && strings.EqualFold(t, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}
