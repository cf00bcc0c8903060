package route

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// A failure is why the proxy answers instead of an upstream.
type failure int

const (
	badGateway failure = iota
	noHealthyUpstream
	gatewayTimeout
	bodyTooLarge
	badRequest
	requestTimeout
)

// failures maps each failure to its answer, over HTTP and over gRPC.
var failures = [...]struct {
	status  int
	code    string // the JSON body's "error"
	grpc    int    // the gRPC status code
	message string // after the route's name
}{
	badGateway:        {http.StatusBadGateway, "bad_gateway", 14, "no upstream answered"},                         // UNAVAILABLE
	noHealthyUpstream: {http.StatusServiceUnavailable, "no_healthy_upstream", 14, "no upstream is healthy"},       // UNAVAILABLE
	gatewayTimeout:    {http.StatusGatewayTimeout, "gateway_timeout", 4, "the upstream did not answer in time"},   // DEADLINE_EXCEEDED
	bodyTooLarge:      {http.StatusRequestEntityTooLarge, "body_too_large", 8, "the request's body is too large"}, // RESOURCE_EXHAUSTED
	badRequest:        {http.StatusBadRequest, "bad_request", 13, "the request's body could not be read"},         // INTERNAL, as gRPC maps 400
	requestTimeout:    {http.StatusRequestTimeout, "request_timeout", 4, "the request's body came too slowly"},    // DEADLINE_EXCEEDED
}

// fail is the reverse proxy's ErrorHandler. The error itself is not
// shown to the client: it would tell where the upstreams are.
//
// A failure of the client is answered even when the server has canceled
// the request because its connection's read deadline passed: the client
// is told 408 rather than nothing (which net/http would send as an empty
// 200). A client that went away gets nothing.
func (e *entry) fail(w http.ResponseWriter, req *http.Request, err error) {
	f := badGateway
	var ce *clientError
	switch {
	case errors.As(err, &ce) && ce.timeout():
		f = requestTimeout
	case req.Context().Err() != nil:
		return // the client went away: nobody to tell
	case errors.As(err, new(*http.MaxBytesError)):
		// The body passed the bound the server reads it with
		// (http.MaxBytesReader) while it was being sent.
		f = bodyTooLarge
	case ce != nil:
		f = badRequest
	case errors.Is(err, errNoUpstream):
		f = noHealthyUpstream
	case errors.Is(err, errTimeout):
		f = gatewayTimeout
	}
	x := exchangeOf(req.Context())
	h := w.Header()
	h.Set(e.table.idHeader, x.id)
	a := failures[f]
	msg := fmt.Sprintf("route %q: %s", e.route.Name, a.message)
	if x.grpc {
		// A Trailers-Only response: the status travels in the only
		// HEADERS frame, which gRPC reads as the trailers.
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", strconv.Itoa(a.grpc))
		h.Set("Grpc-Message", grpcEscape(msg))
		w.WriteHeader(http.StatusOK)
		return
	}
	if f == noHealthyUpstream {
		h.Set("Retry-After", "1")
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{a.code, msg})
}

// grpcEscape percent-encodes s for grpc-message: every byte outside
// printable ASCII, and '%'.
func grpcEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ' ' <= c && c <= '~' && c != '%' {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(s)+8), s[:i]...)
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	if b == nil {
		return s
	}
	return string(b)
}
