// Package refsvc builds and runs the rate limit services Bouncer's service
// is measured against, each as a child process on free loopback ports:
// envoyproxy/ratelimit (Envoy RLS v3 over Redis, the service `bouncer
// serve` is a drop-in for), gubernator (in memory, its own gRPC API) and
// `bouncer serve` itself.
//
// The references are built from their Go modules at the versions this
// module's go.mod pins, never copied: envoyproxy/ratelimit with go build
// in this module, so with this module's dependencies (the gRPC and
// go-control-plane versions Bouncer uses); gubernator with go install
// <pkg>@<version>, so with the dependencies of its own go.mod, because
// under this module's newer OpenTelemetry SDK it refuses to start (its
// tracing resource carries an older schema URL than the SDK's default
// resource, and merging them fails). Bouncer is built from the parent
// module. Binaries are kept under the user's cache directory, so only the
// first build is slow; each is built at most once per process.
//
// A started Server is stopped with Stop, which kills the process and
// waits for it; on Linux a server also dies with the process that started
// it, so a crashed test leaves nothing running.
package refsvc
