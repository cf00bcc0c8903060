// Package header is the one place that writes and parses rate-limit
// headers, and writes the body of a denied answer.
//
// It writes the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11: named policies with q, w, qu
// and pk; items with r, t and pk), the X-RateLimit-* fields many clients
// read, and Retry-After, from the Values of a decision (Values.Append).
// WriteDenied answers 429 with those headers and a body, defined here
// once for every transport: JSON ({"error":"rate_limited",...}, Denial),
// or RFC 9457 problem details of the draft's quota-exceeded type when the
// client's Accept prefers application/problem+json.
//
// It parses the same fields on the client side: ParsePolicies,
// ParseRateLimit, ParseRetryAfter and ParseLegacy. As the draft asks,
// malformed fields are ignored rather than reported: a field that is not
// a valid structured-field list (RFC 9651) yields nothing, and a member
// with a parameter of the wrong type is left out. No input makes a parser
// panic.
//
// ForLimit and Values.Decided define what the fields say of a limit and
// its decision, for every algorithm; every writer of Bouncer (the HTTP
// middleware, the gRPC interceptors, the gateway, the RLS service and the
// JSON API) derives its Values through them.
//
// Degraded names the field that marks an answer decided without the
// shared store, which every edge and service writes.
//
// Every function is safe for concurrent use. The package imports the
// standard library and the module's root package (its vocabulary) only.
package header
