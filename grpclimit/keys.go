package grpclimit

import (
	"context"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/internal/edge"
)

// Call is what the rules see of a call: a unary call, or a stream when it
// opens. Key functions, Options.Cost and Options.Exclude must not modify
// it.
type Call struct {
	// Ctx is the call's context, as the interceptors before this one
	// left it (for streams, the ServerStream's Context): it carries the
	// peer, the deadline, and the user an authentication interceptor set
	// with bouncer.WithUser.
	Ctx context.Context

	// Method is the full method name, "/package.Service/Method".
	Method string

	// Peer is the address of the socket's peer, unmapped and without a
	// zone; the zero Addr when the transport has no IP address (a Unix
	// socket, bufconn).
	Peer netip.Addr

	// MD is the call's incoming metadata (keys lower-case). It may be
	// nil.
	MD metadata.MD
}

// A KeyFunc says whose count a call is charged to under a rule: it
// returns the key's value, or false if the rule does not apply to the
// call (an API-key rule for a call without a key). Values may come from
// the client: the interceptors escape and bound them before they reach a
// store (long values are kept as a digest), so a value cannot fake
// another key.
type KeyFunc func(c *Call) (string, bool)

// Global counts every call under one key.
func Global() KeyFunc {
	return func(*Call) (string, bool) { return "", true }
}

// Peer counts each client address, grouped to its network (a /64 for
// IPv6 by default), as res resolves it from the socket's peer and, only
// when that peer is one of res.TrustedProxies, the forwarding metadata
// ("x-forwarded-for", or "forwarded" if res.Header says so). A nil res is
// the zero Resolver, which trusts no proxy: the key is the socket's peer,
// whatever the call's metadata says. A call without an IP peer is not
// counted by the rule.
func Peer(res *clientip.Resolver) KeyFunc {
	if res == nil {
		res = &clientip.Resolver{}
	}
	name := "x-forwarded-for"
	if res.Header != "" {
		name = strings.ToLower(res.Header)
	}
	return func(c *Call) (string, bool) {
		k := res.KeyOf(res.FromPeer(c.Peer, c.MD.Get(name)))
		return k, k != ""
	}
}

// Metadata counts each value of the metadata key name (its first value);
// a call without it is not counted by the rule. The value is counted as
// sent: limit by a verified identity (User) where an invented value must
// not buy a fresh quota.
func Metadata(name string) KeyFunc {
	name = strings.ToLower(name)
	return func(c *Call) (string, bool) {
		if vs := c.MD.Get(name); len(vs) > 0 && vs[0] != "" {
			return vs[0], true
		}
		return "", false
	}
}

// Method counts each method, by its full name
// ("/package.Service/Method").
func Method() KeyFunc {
	return func(c *Call) (string, bool) { return c.Method, true }
}

// User counts each verified user, as an authentication interceptor in
// front of the limiting ones recorded with bouncer.WithUser; a call without one
// is not counted by the rule.
func User() KeyFunc {
	return func(c *Call) (string, bool) { return bouncer.UserFrom(c.Ctx) }
}

// Compose counts each combination of the values of fns, such as a user on
// one method: Compose(User(), Method()). The rule applies only to calls
// that every fn applies to.
func Compose(fns ...KeyFunc) KeyFunc { return edge.Compose(fns) }
