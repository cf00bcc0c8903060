// Package httplimit is net/http middleware that rate-limits requests with
// a bouncer.Limiter: each Rule says whose requests count together (a
// KeyFunc: client IP, API key, verified user, route, method, header,
// global, or a Compose of them) and the limits they share, checked all or
// nothing. A refused request gets 429 with Retry-After, the IETF
// RateLimit-Policy and RateLimit fields and X-RateLimit-* (package
// header), and a JSON body or RFC 9457 problem details. Allowed responses
// carry the headers too, unless Options.DeniedOnly.
//
// Shaping leaky buckets hold a request for its Delay instead of refusing
// it; Concurrency limits hold their units while the handler runs; shadow
// rules count and log but never refuse; a rule with Usage reserves an
// estimate and is charged what the request really cost (LLM tokens,
// bytes) once the handler has answered, past its limits if need be. The middleware never reads a
// clock of its own for decisions: the Limiter does. See
// docs/middleware.md.
package httplimit
