// Package rls serves Envoy's rate limit service API (RLS v3,
// envoy.service.ratelimit.v3.RateLimitService) over gRPC: Envoy, or any
// client built from go-control-plane, asks ShouldRateLimit and gets one
// status per descriptor, as from envoyproxy/ratelimit.
//
// A Server translates between the protobuf messages and package rules,
// which decides; it never touches a store itself.
package rls
