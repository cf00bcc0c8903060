// Package httpretry is the client side of rate limiting: an
// http.RoundTripper, Transport, for clients of rate-limited APIs.
//
// A Transport retries a request only when a retry is safe (an idempotent
// method, or an Idempotency-Key header, and a body it can replay) and
// only after failures a retry can cure: 429, 502, 503 and 504 answers,
// and connections reset or refused before any answer. After a 429 or a
// 503 it waits what the server asked for, the longer of Retry-After and
// the RateLimit field's reset of an exhausted quota
// (draft-ietf-httpapi-ratelimit-headers), or X-RateLimit-Reset; after
// other failures it backs off exponentially with full jitter. A wait
// longer than MaxDelay, or one that cannot end before the request's
// deadline, is not started: the caller gets the failure at once. A retry
// budget shared by every request through the Transport keeps retries from
// multiplying the load on a server that is failing.
//
// With Pace set, the Transport also remembers, per host, the quotas the
// server announces, and holds a request back until the reset of a quota
// it knows to be spent, so that a client that paces does not meet a 429
// for a quota it was told about.
//
// The headers are read by package header, which also writes them on the
// server side.
package httpretry
