// Package replay is when an HTTP request may be sent again: the one rule
// of httpretry's client and the gateway's retries.
package replay

import "net/http"

// Replayable reports whether req may be sent again: an idempotent method
// (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or an Idempotency-Key header
// (present, as net/http's Transport counts it, even with a nil value),
// and a body that is empty or that GetBody can make again.
func Replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, ok := req.Header["Idempotency-Key"]
	return ok
}

// CloseBody closes req's body, if it has one.
func CloseBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
