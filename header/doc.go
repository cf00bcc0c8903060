// Package header is the one place that writes and parses rate-limit
// headers.
//
// It writes the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11: named policies with q, w, qu
// and pk; items with r, t and pk), the X-RateLimit-* fields many clients
// read, and Retry-After, from the Values of a decision (Values.Append).
//
// It parses the same fields on the client side: ParsePolicies,
// ParseRateLimit, ParseRetryAfter and ParseLegacy. As the draft asks,
// malformed fields are ignored rather than reported: a field that is not
// a valid structured-field list (RFC 9651) yields nothing, and a member
// with a parameter of the wrong type is left out. No input makes a parser
// panic.
//
// The package imports the standard library only.
package header
