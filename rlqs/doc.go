// Package rlqs is Envoy's rate limit quota service (RLQS,
// envoy.service.rate_limit_quota.v3), server and client. With RLQS the
// limiter is off the request path: each proxy sorts its requests into
// buckets, decides them locally by an assignment the server streams to
// it (allow all, deny all, or a token bucket), and reports each bucket's
// usage on one long-lived stream every report interval.
//
// The server, Server, answers those streams over a rules.Engine: a
// bucket id is matched against a domain's rules as an RLS descriptor is,
// and the requests clients report as allowed are counted in the engine's
// store, where RLS checks of the same descriptors see them. Servers that
// share a store share the clients' demands (Demands) and so divide each
// limit alike; bouncer serve runs one beside RLS on its gRPC listener.
//
// The client, Client, behaves as Envoy's filter does, for gRPC-Go and
// net/http servers (Handler, Unary, Stream) and as a load generator: it
// decides each request by its bucket's assignment, falls back on
// ClientOptions.NoAssignment and Expired when it has none, and reports
// on a stream of its own (Run).
//
// The division: a client is one connection, whatever its streams. Its
// demand for a bucket is what it reported over the time since its last
// report, on the server's clock, counted up to twice the share it had or
// twice an equal share. Once an epoch (one report interval, DefaultInterval
// by default), each bucket's rate is divided among its clients' demands
// as they stood when the epoch began, max-min fair; a client new in the
// epoch takes only what that division left. The assignments in force
// then add up to the rule's rate at most.
//
// The bounds: what clients make a Server hold is bounded, each by an
// option with a default (MaxBuckets, MaxConnStreams, MaxSubscriptions,
// MaxConnIDBytes, MaxIDBytes; DefaultMaxBuckets and the other Default
// constants). Past a bound a new stream is refused with
// RESOURCE_EXHAUSTED, or a new bucket is answered with abandon_action.
//
// docs/rlqs.md has the division's guarantee and its tests, the memory
// each bound costs, Envoy's configuration and the measured figures.
package rlqs
