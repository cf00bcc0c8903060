package clientip

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestThroughListener runs a server whose handler answers with Key, and
// a client that connects from a loopback address with a spoofed header.
func TestThroughListener(t *testing.T) {
	cases := []struct {
		name    string
		network string // tcp4 or tcp6
		r       Resolver
		header  string
		value   string
		want    string
	}{
		{"ipv4/untrusted", "tcp4", Resolver{}, "X-Forwarded-For", "203.0.113.9", "127.0.0.1"},
		{"ipv4/other network trusted", "tcp4", Resolver{TrustedProxies: trusted}, "X-Forwarded-For", "203.0.113.9", "127.0.0.1"},
		{"ipv4/trusted", "tcp4", Resolver{TrustedProxies: mustPrefixes("127.0.0.0/8")}, "X-Forwarded-For", "203.0.113.9", "203.0.113.9"},
		{"ipv4/trusted, Forwarded", "tcp4", Resolver{TrustedProxies: mustPrefixes("127.0.0.0/8"), Header: "Forwarded"}, "Forwarded", `for="[2001:db8:1:2::9]:4711"`, "2001:db8:1:2::/64"},
		{"ipv6/untrusted", "tcp6", Resolver{}, "X-Forwarded-For", "203.0.113.9", "::/64"},
		{"ipv6/untrusted, /128", "tcp6", Resolver{IPv6Prefix: 128}, "X-Forwarded-For", "203.0.113.9", "::1"},
		{"ipv6/trusted", "tcp6", Resolver{TrustedProxies: mustPrefixes("::1")}, "X-Forwarded-For", "203.0.113.9", "203.0.113.9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := serve(t, c.network, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				io.WriteString(w, c.r.Key(req))
			}))
			req, err := http.NewRequest("GET", srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(c.header, c.value)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(body); got != c.want {
				t.Fatalf("got key %q, want %q", got, c.want)
			}
		})
	}
}

// serve starts a server for h on the loopback address of network and
// returns it, skipping the test if the machine has no such address.
func serve(t *testing.T, network string, h http.Handler) *httptest.Server {
	t.Helper()
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)
	if network == "tcp6" {
		addr = netip.AddrPortFrom(netip.IPv6Loopback(), 0)
	}
	l, err := net.Listen(network, addr.String())
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}
