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
// holds a request for its Response.Delay and ends it through the
// Response's Ledger: the units of the rules with RefundOn5xx go back when
// the request fails, concurrency limits' leases when it ends; it
// loads configs with such limits through LoadOptions. See
// docs/configuration.md.
//
// # Files
//
// The formats: config.go (Config, Domain, Rule: one type from YAML to
// runtime), native.go (Bouncer's format), envoy.go (envoyproxy/ratelimit's),
// load.go (Load, Parse, LoadOptions), limits.go and ratehint.go (a rule's
// limits and the rates it accepts), errors.go (ConfigError and the
// sentinel errors).
//
// The engine: request.go (Request, Response, Status), match.go (the
// descriptor tree and matching), decide.go (Engine, Decide),
// decide_bouncer.go and decide_envoy.go (the two semantics),
// override.go (a request's limit override), finish.go (a response's code
// and binding status), headers.go (its rate-limit headers), ledger.go
// (the bouncer.Ledger of what a decision charged, which the caller ends),
// settle.go (Report: a cost charged once a request has ended),
// report.go (the bound on one report), unknown.go (unknown domains),
// keys.go (KeyObserver, which the admin API's key index implements, and
// State, Reset and Resolve, the engine's operations on one key).
//
// The reloader: reload.go (Reloader, on file change and SIGHUP).
//
// RLQS buckets: bucket.go (a bucket id matched to a rule, and charged).
//
// The formats stay in this package: they build the Config, Domain and
// Rule the engine reads as they are, so a package of their own would
// need a third one for those types, or the engine importing the
// formats' internals.
package rules
