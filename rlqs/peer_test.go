package rlqs

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc/peer"
)

// A connection is named by both its ends: one client port may reach two
// listeners at once (the kernel shares an ephemeral port among
// destinations), and those are two connections.
func TestPeerName(t *testing.T) {
	from := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	at := func(port int) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{Addr: from, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}})
	}
	cases := []struct {
		ctx  context.Context
		want string
	}{
		{at(8081), "127.0.0.1:40000 to 127.0.0.1:8081"},
		{at(8082), "127.0.0.1:40000 to 127.0.0.1:8082"},
		{peer.NewContext(context.Background(), &peer.Peer{Addr: from}), "127.0.0.1:40000"},
		{context.Background(), ""},
	}
	for _, c := range cases {
		if got := peerName(c.ctx); got != c.want {
			t.Errorf("peerName = %q, want %q", got, c.want)
		}
	}
}
