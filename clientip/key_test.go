package clientip

import (
	"net/netip"
	"testing"
)

func TestKeyOf(t *testing.T) {
	cases := []struct {
		name string
		r    Resolver
		addr string // "" for the zero Addr
		want string
	}{
		{"ipv4 default is the address", Resolver{}, "203.0.113.7", "203.0.113.7"},
		{"ipv4 /24", Resolver{IPv4Prefix: 24}, "203.0.113.7", "203.0.113.0/24"},
		{"ipv4 /32 explicit", Resolver{IPv4Prefix: 32}, "203.0.113.7", "203.0.113.7"},
		{"ipv4 /1", Resolver{IPv4Prefix: 1}, "203.0.113.7", "128.0.0.0/1"},
		{"ipv6 default is the /64", Resolver{}, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"ipv6 same /64 same key", Resolver{}, "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"ipv6 next /64 another key", Resolver{}, "2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"ipv6 /48", Resolver{IPv6Prefix: 48}, "2001:db8:1:2:3:4:5:6", "2001:db8:1::/48"},
		{"ipv6 /56", Resolver{IPv6Prefix: 56}, "2001:db8:1:2ff::1", "2001:db8:1:200::/56"},
		{"ipv6 /128 is the address", Resolver{IPv6Prefix: 128}, "2001:db8::6", "2001:db8::6"},
		{"ipv6 prefix does not apply to ipv4", Resolver{IPv6Prefix: 48}, "203.0.113.7", "203.0.113.7"},
		{"ipv4 prefix does not apply to ipv6", Resolver{IPv4Prefix: 8}, "2001:db8::6", "2001:db8::/64"},
		{"ipv6 loopback", Resolver{}, "::1", "::/64"},
		{"ipv4-mapped is ipv4", Resolver{IPv4Prefix: 24}, "::ffff:203.0.113.7", "203.0.113.0/24"},
		{"zone dropped", Resolver{IPv6Prefix: 128}, "fe80::1%eth0", "fe80::1"},
		{"invalid address", Resolver{}, "", ""},
		{"ipv4 prefix out of range uses the default", Resolver{IPv4Prefix: 40}, "203.0.113.7", "203.0.113.7"},
		{"ipv6 prefix out of range uses the default", Resolver{IPv6Prefix: -1}, "2001:db8::6", "2001:db8::/64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a netip.Addr
			if c.addr != "" {
				a = netip.MustParseAddr(c.addr)
			}
			if got := c.r.KeyOf(a); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestKey(t *testing.T) {
	cases := []struct {
		name   string
		r      Resolver
		remote string
		header map[string][]string
		want   string
	}{
		{"peer", Resolver{}, "203.0.113.7:1234", nil, "203.0.113.7"},
		{"peer ipv6", Resolver{}, "[2001:db8:1:2::7]:1234", nil, "2001:db8:1:2::/64"},
		{"forwarded client grouped", Resolver{TrustedProxies: trusted, IPv4Prefix: 24}, "10.0.0.1:80", xff("203.0.113.7"), "203.0.113.0/24"},
		{"invalid peer", Resolver{}, "@", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.r.Key(request(t, c.remote, c.header)); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}
