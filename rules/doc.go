// Package rules is Bouncer's rate limit configuration and the engine that
// decides requests with it.
//
// A config is YAML in one of two formats: Bouncer's own (a domain, plans,
// client-IP entries and rules, each matching descriptor entries and
// holding several limits checked all or nothing) or envoyproxy/ratelimit's
// (domains of nested descriptors), read as it is and, by default, counted
// as that project counts. Load and Parse validate a config whole and
// report every problem with file, line and reason; a Reloader swaps a new
// config into an Engine atomically, or keeps the old one.
//
// An Engine matches each descriptor of a Request to a rule and charges a
// bouncer.Limiter; transports (package rls for Envoy's gRPC API, package
// jsonapi for HTTP) convert to and from Request and Response. A caller
// that learns how each request ends, such as the gateway, can do more: it
// holds a request for its Response.Delay, gives units back with
// Engine.Refund when the request fails (the rules with RefundOn5xx), and
// releases concurrency limits' leases with it when the request ends; it
// loads configs with such limits through LoadOptions. See
// docs/configuration.md.
package rules
