package rlqs

import (
	"context"

	"google.golang.org/grpc/peer"
)

// peerName names the client behind a stream: its connection, by its
// remote address (host and port) and the local address it reached, so
// that every stream one connection opens is the same client, and two
// connections are two clients even when they come from one port to two
// listeners. A stream with no peer in its context (an in-process
// caller) is named "".
func peerName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if p.LocalAddr == nil {
		return p.Addr.String()
	}
	return p.Addr.String() + " to " + p.LocalAddr.String()
}
