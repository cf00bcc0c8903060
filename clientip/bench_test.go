package clientip

import (
	"net/netip"
	"testing"
)

// BenchmarkAddr resolves a request that reached the server through two
// trusted proxies: the walk reads three hops, the client's and theirs.
func BenchmarkAddr(b *testing.B) {
	cases := []struct {
		name   string
		r      Resolver
		header map[string][]string
	}{
		{"header=X-Forwarded-For", Resolver{TrustedProxies: trusted}, xff("198.51.100.1, 203.0.113.9, 10.1.1.1, 10.2.2.2")},
		{"header=Forwarded", Resolver{TrustedProxies: trusted, Header: "Forwarded"},
			fwd(`for=198.51.100.1, for=203.0.113.9;proto=https, for="10.1.1.1:4711";proto=https, for=10.2.2.2;proto=https`)},
	}
	want := netip.MustParseAddr("203.0.113.9")
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			req := request(b, "10.0.0.1:5000", c.header)
			b.ReportAllocs()
			for b.Loop() {
				if got := c.r.Addr(req); got != want {
					b.Fatalf("got %v, want %v", got, want)
				}
			}
		})
	}
}
