//go:build tools

package refsvc

// envoyproxy/ratelimit's main package, imported so that go mod tidy keeps
// its module, at the version this module pins, in go.mod; the tag keeps it
// out of every build. Gubernator's module needs no such line: rlsload
// imports its API package.
import _ "github.com/envoyproxy/ratelimit/src/service_cmd"
