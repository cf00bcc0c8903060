// Package grpclimit is a pair of gRPC server interceptors that rate-limit
// calls with a bouncer.Limiter, the twin of package httplimit on the same
// core: each Rule says whose calls count together (a KeyFunc: peer
// address, verified user, method, metadata, global, or a Compose of them)
// and the limits they share, checked all or nothing. New returns an
// Interceptor whose Unary and Stream methods are the interceptors.
//
// A refused call fails with RESOURCE_EXHAUSTED, "rate limit exceeded:
// <policy>", and status details a client decodes with
// status.FromError(err).Details(): an errdetails.RetryInfo with the
// delay after which the same call would pass (absent when none would),
// and an errdetails.QuotaFailure naming the rule. The values of package
// header (ratelimit-policy, ratelimit, x-ratelimit-limit,
// x-ratelimit-remaining, x-ratelimit-reset, and retry-after in whole
// seconds) go in the trailer of a refused call and in the header metadata
// of an allowed one, unless Options.DeniedOnly; bouncer-degraded: true
// marks a decision made without the shared store.
//
// A stream is one call for the limits, charged when it opens; a
// Concurrency limit holds its units while the stream lives. Shaping leaky
// buckets hold a call for its Delay instead of refusing it; shadow rules
// count and log but never refuse; a rule with Usage reserves an estimate
// and is charged what the call really cost (LLM tokens, bytes sent) once
// the handler has ended it, past its limits if need be. The interceptors never read a clock of
// their own for decisions: the Limiter does.
package grpclimit
