// Package refsvc builds and runs the rate limit services Bouncer's service
// is measured against, each as a child process on free loopback ports:
// envoyproxy/ratelimit (Envoy RLS v3 over Redis, the service `bouncer
// serve` is a drop-in for), gubernator (in memory, its own gRPC API) and
// `bouncer serve` itself.
//
// The references are built from their Go modules at the versions this
// module's go.mod pins, never copied, each with go install
// <pkg>@<version>, so with the dependencies of its own go.mod: under the
// newer OpenTelemetry this module gets from Bouncer, gubernator refuses to
// start (its tracing resource carries an older schema URL than the SDK's
// default resource) and envoyproxy/ratelimit does not compile (it uses
// otelgrpc interceptors that later versions removed). Bouncer is built
// from the parent module. Binaries are kept under the user's cache directory, so only the
// first build is slow; each is built at most once per process.
//
// A started Server is stopped with Stop, which kills the process and
// waits for it; on Linux a server also dies with the process that started
// it, so a crashed test leaves nothing running.
package refsvc
