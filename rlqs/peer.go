package rlqs

import (
	"context"

	"google.golang.org/grpc/peer"
)

// peerName names the client behind a stream: its connection's remote
// address (host and port), so that every stream one connection opens is
// the same client. A stream with no peer in its context (an in-process
// caller) is named "".
func peerName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	return p.Addr.String()
}
