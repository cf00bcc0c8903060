package clientip_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"

	"github.com/bouncerhq/bouncer/clientip"
)

// Behind a load balancer at 10.0.0.1 that appends to X-Forwarded-For, the
// client is the rightmost address the proxies did not write. A client
// that connects directly cannot choose its address with the header.
func Example() {
	proxies, err := clientip.ParsePrefixes([]string{"10.0.0.0/8"})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := clientip.Resolver{TrustedProxies: proxies}
	if err := r.Validate(); err != nil {
		fmt.Println(err)
		return
	}

	viaProxy := httptest.NewRequest("GET", "/", nil)
	viaProxy.RemoteAddr = "10.0.0.1:5000"
	viaProxy.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.9, 10.0.0.2")
	fmt.Println(r.Addr(viaProxy))

	direct := httptest.NewRequest("GET", "/", nil)
	direct.RemoteAddr = "203.0.113.50:6000"
	direct.Header.Set("X-Forwarded-For", "198.51.100.1")
	fmt.Println(r.Addr(direct))
	// Output:
	// 203.0.113.9
	// 203.0.113.50
}

// An IPv6 client usually holds a whole /64, so two of its addresses give
// one key; an IPv4 address is its own key.
func ExampleResolver_KeyOf() {
	var r clientip.Resolver
	fmt.Println(r.KeyOf(netip.MustParseAddr("2001:db8:1:2::7")))
	fmt.Println(r.KeyOf(netip.MustParseAddr("2001:db8:1:2:aaaa::1")))
	fmt.Println(r.KeyOf(netip.MustParseAddr("203.0.113.7")))
	r.IPv4Prefix = 24
	fmt.Println(r.KeyOf(netip.MustParseAddr("203.0.113.7")))
	fmt.Printf("%q\n", r.KeyOf(netip.Addr{}))
	// Output:
	// 2001:db8:1:2::/64
	// 2001:db8:1:2::/64
	// 203.0.113.7
	// 203.0.113.0/24
	// ""
}

// A gRPC server passes the peer's address and the x-forwarded-for
// metadata values.
func ExampleResolver_FromPeer() {
	r := clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	peer := netip.MustParseAddr("10.0.0.1")
	fmt.Println(r.FromPeer(peer, []string{"203.0.113.9", "10.0.0.2"}))
	// Output: 203.0.113.9
}

// Forwarded (RFC 7239) is read from its for= parameters. An obfuscated
// hop ends the walk: the proxy that hid its client stands for it.
func ExampleResolver_forwarded() {
	r := clientip.Resolver{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Header:         "Forwarded",
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.1:5000"
	req.Header.Set("Forwarded", `for="[2001:db8::9]:4711";proto=https, for=10.0.0.2`)
	fmt.Println(r.Addr(req))
	req.Header.Set("Forwarded", `for=203.0.113.9, for=_hidden, for=10.0.0.2`)
	fmt.Println(r.Addr(req))
	// Output:
	// 2001:db8::9
	// 10.0.0.2
}

// With Depth, the client is the entry that many positions from the right,
// for proxies whose number is known but not their addresses: here a CDN
// in front of a load balancer at 10.0.0.1, which writes the CDN's address
// after the client's that the CDN wrote.
func ExampleResolver_depth() {
	r := clientip.Resolver{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")},
		Depth:          2,
	}
	fmt.Println(r.FromPeer(netip.MustParseAddr("10.0.0.1"), []string{"198.51.100.1, 203.0.113.9, 192.0.2.200"}))
	// Output: 203.0.113.9
}

func ExampleParsePrefixes() {
	_, err := clientip.ParsePrefixes([]string{"10.0.0.0/8", "192.0.2.1", "10.0.0.0/33"})
	fmt.Println(err)
	// Output: clientip: entry 2: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range
}
