package clientip

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// trusted are the proxies of the tables: a private network, an IPv6
// network and one bare address.
var trusted = mustPrefixes("10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.1")

func mustPrefixes(cidrs ...string) []netip.Prefix {
	p, err := ParsePrefixes(cidrs)
	if err != nil {
		panic(err)
	}
	return p
}

// request returns a request from remote carrying the given header lines.
func request(t testing.TB, remote string, header map[string][]string) *http.Request {
	t.Helper()
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = remote
	for name, lines := range header {
		req.Header[http.CanonicalHeaderKey(name)] = lines
	}
	return req
}

type addrCase struct {
	name   string
	r      Resolver
	remote string
	header map[string][]string
	want   string // "" for the zero Addr
}

func xff(lines ...string) map[string][]string { return map[string][]string{"X-Forwarded-For": lines} }
func fwd(lines ...string) map[string][]string { return map[string][]string{"Forwarded": lines} }

func runAddr(t *testing.T, cases []addrCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.r.Addr(request(t, c.remote, c.header))
			if c.want == "" {
				if got.IsValid() {
					t.Fatalf("got %v, want the zero Addr", got)
				}
				return
			}
			if want := netip.MustParseAddr(c.want); got != want {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestAddrPeer(t *testing.T) {
	both := map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=198.51.100.1"}, "X-Real-IP": {"198.51.100.1"}}
	tp := Resolver{TrustedProxies: trusted}
	runAddr(t, []addrCase{
		{"zero resolver/no header", Resolver{}, "203.0.113.7:1234", nil, "203.0.113.7"},
		{"zero resolver/spoofed headers ignored", Resolver{}, "10.0.0.1:1234", both, "10.0.0.1"},
		{"untrusted/spoofed X-Forwarded-For ignored", tp, "203.0.113.7:1234", xff("198.51.100.1"), "203.0.113.7"},
		{"untrusted/spoofed Forwarded ignored", Resolver{TrustedProxies: trusted, Header: "Forwarded"}, "203.0.113.7:1234", fwd("for=198.51.100.1"), "203.0.113.7"},
		{"untrusted/depth ignored", Resolver{TrustedProxies: trusted, Depth: 1}, "203.0.113.7:1234", xff("198.51.100.1"), "203.0.113.7"},
		{"untrusted/next to a trusted network", tp, "11.0.0.1:1234", xff("198.51.100.1"), "11.0.0.1"},
		{"peer/ipv6", tp, "[2001:db8::5]:443", both, "2001:db8::5"},
		{"peer/ipv4-mapped is unmapped", tp, "[::ffff:203.0.113.7]:80", both, "203.0.113.7"},
		{"peer/zone dropped", tp, "[fe80::1%eth0]:80", both, "fe80::1"},
		{"peer/bare address", tp, "203.0.113.7", nil, "203.0.113.7"},
		{"peer/invalid", tp, "not-an-address:80", both, ""},
		{"peer/empty", tp, "", both, ""},
		{"peer/unbracketed ipv6 with port", tp, "2001:db8::5:80", nil, "2001:db8::5:80"},
		{"peer/hostname", tp, "localhost:80", nil, ""},
	})
}

func TestAddrXForwardedFor(t *testing.T) {
	tp := Resolver{TrustedProxies: trusted}
	peer := "10.0.0.1:5000"
	runAddr(t, []addrCase{
		{"no header", tp, peer, nil, "10.0.0.1"},
		{"empty header", tp, peer, xff(""), "10.0.0.1"},
		{"one hop", tp, peer, xff("203.0.113.9"), "203.0.113.9"},
		{"right to left", tp, peer, xff("198.51.100.1, 203.0.113.9"), "203.0.113.9"},
		{"trusted hops skipped", tp, peer, xff("198.51.100.1, 203.0.113.9, 10.1.1.1, 192.0.2.1"), "203.0.113.9"},
		{"bare trusted address is one address", tp, peer, xff("203.0.113.9, 192.0.2.2"), "192.0.2.2"},
		{"all trusted gives the leftmost", tp, peer, xff("10.0.0.5, 10.0.0.6"), "10.0.0.5"},
		{"invalid entry mid chain gives the last valid", tp, peer, xff("203.0.113.9, garbage, 10.0.0.6"), "10.0.0.6"},
		{"invalid rightmost gives the peer", tp, peer, xff("203.0.113.9, garbage"), "10.0.0.1"},
		{"unknown ends the walk", tp, peer, xff("203.0.113.9, unknown, 10.0.0.6"), "10.0.0.6"},
		{"several lines are one list", tp, peer, xff("198.51.100.1, 203.0.113.9", "10.0.0.6"), "203.0.113.9"},
		{"several lines, skipping across them", tp, peer, xff("203.0.113.9", "10.0.0.6, 10.0.0.7", "192.0.2.1"), "203.0.113.9"},
		{"several lines, the last line is the right end", tp, peer, xff("203.0.113.9", "198.51.100.2"), "198.51.100.2"},
		{"empty line skipped", tp, peer, xff("203.0.113.9", ""), "203.0.113.9"},
		{"spaces and tabs", tp, peer, xff("  198.51.100.1 ,\t203.0.113.9\t,  10.0.0.6  "), "203.0.113.9"},
		{"no spaces", tp, peer, xff("198.51.100.1,203.0.113.9,10.0.0.6"), "203.0.113.9"},
		{"empty elements skipped", tp, peer, xff("203.0.113.9,, ,10.0.0.6,"), "203.0.113.9"},
		{"space inside an entry", tp, peer, xff("203.0.113.9, 10.0.0.6 10.0.0.7"), "10.0.0.1"},
		{"ipv4 with port", tp, peer, xff("203.0.113.9:4711, 10.0.0.6:80"), "203.0.113.9"},
		{"ipv4 with bad port", tp, peer, xff("203.0.113.9:99999"), "10.0.0.1"},
		{"ipv4 with empty port", tp, peer, xff("203.0.113.9:"), "10.0.0.1"},
		{"ipv4 bracketed", tp, peer, xff("[203.0.113.9]"), "10.0.0.1"},
		{"ipv4 leading zeros", tp, peer, xff("203.0.113.009"), "10.0.0.1"},
		{"ipv6 bare", tp, peer, xff("2001:db8::9"), "2001:db8::9"},
		{"ipv6 bracketed", tp, peer, xff("[2001:db8::9]"), "2001:db8::9"},
		{"ipv6 bracketed with port", tp, peer, xff("[2001:db8::9]:4711"), "2001:db8::9"},
		{"ipv6 bracketed, unclosed", tp, peer, xff("[2001:db8::9"), "10.0.0.1"},
		{"ipv6 bracketed, junk after", tp, peer, xff("[2001:db8::9]x"), "10.0.0.1"},
		{"ipv6 trusted hop skipped", tp, peer, xff("2001:db8::9, [2001:db8:ffff::2]:80"), "2001:db8::9"},
		{"ipv6 zone dropped", tp, peer, xff("fe80::9%eth0"), "fe80::9"},
		{"ipv4-mapped entry unmapped", tp, peer, xff("::ffff:203.0.113.9"), "203.0.113.9"},
		{"ipv4-mapped trusted hop skipped", tp, peer, xff("203.0.113.9, [::ffff:10.0.0.6]:80"), "203.0.113.9"},
		{"ipv6 peer trusted", tp, "[2001:db8:ffff::1]:443", xff("203.0.113.9"), "203.0.113.9"},
		{"ipv4-mapped peer trusted", tp, "[::ffff:10.0.0.1]:443", xff("203.0.113.9"), "203.0.113.9"},
		{"header name in any case", Resolver{TrustedProxies: trusted, Header: "x-forwarded-for"}, peer, xff("203.0.113.9"), "203.0.113.9"},
		{"Forwarded not read", tp, peer, fwd("for=203.0.113.9"), "10.0.0.1"},
		{"unsupported header reads nothing", Resolver{TrustedProxies: trusted, Header: "X-Real-IP"}, peer,
			map[string][]string{"X-Real-IP": {"203.0.113.9"}, "X-Forwarded-For": {"203.0.113.9"}}, "10.0.0.1"},
	})
}

func TestAddrForwarded(t *testing.T) {
	tp := Resolver{TrustedProxies: trusted, Header: "Forwarded"}
	peer := "10.0.0.1:5000"
	runAddr(t, []addrCase{
		{"one hop", tp, peer, fwd("for=203.0.113.9"), "203.0.113.9"},
		{"quoted", tp, peer, fwd(`for="203.0.113.9"`), "203.0.113.9"},
		{"quoted with port", tp, peer, fwd(`for="203.0.113.9:4711"`), "203.0.113.9"},
		{"quoted ipv6", tp, peer, fwd(`for="[2001:db8::9]"`), "2001:db8::9"},
		{"quoted ipv6 with port", tp, peer, fwd(`for="[2001:db8::9]:4711"`), "2001:db8::9"},
		{"unquoted ipv6 bracketed", tp, peer, fwd(`for=[2001:db8::9]`), "2001:db8::9"},
		{"obfuscated port", tp, peer, fwd(`for="203.0.113.9:_p0rt-1"`), "203.0.113.9"},
		{"empty obfuscated port", tp, peer, fwd(`for="203.0.113.9:_"`), "10.0.0.1"},
		{"mixed case name", tp, peer, fwd("For=203.0.113.9"), "203.0.113.9"},
		{"upper case name", tp, peer, fwd(`FOR="[2001:db8::9]"`), "2001:db8::9"},
		{"header name in any case", Resolver{TrustedProxies: trusted, Header: "forwarded"}, peer, fwd("for=203.0.113.9"), "203.0.113.9"},
		{"several params", tp, peer, fwd("for=203.0.113.9;proto=https;by=10.0.0.1"), "203.0.113.9"},
		{"for after other params", tp, peer, fwd(`proto=https;by="[2001:db8:ffff::1]";for=203.0.113.9`), "203.0.113.9"},
		{"spaces around semicolons", tp, peer, fwd("for=203.0.113.9 ; proto=https"), "203.0.113.9"},
		{"empty pairs", tp, peer, fwd("for=203.0.113.9;;proto=https;"), "203.0.113.9"},
		{"chain right to left", tp, peer, fwd("for=198.51.100.1, for=203.0.113.9, for=10.0.0.6"), "203.0.113.9"},
		{"several lines", tp, peer, fwd("for=198.51.100.1, for=203.0.113.9", "for=10.0.0.6;proto=http"), "203.0.113.9"},
		{"all trusted gives the leftmost", tp, peer, fwd("for=10.0.0.5, for=10.0.0.6"), "10.0.0.5"},
		{"comma in a quoted value", tp, peer, fwd(`for=203.0.113.9;host="a,b", for=10.0.0.6`), "203.0.113.9"},
		{"escaped quote in a quoted value", tp, peer, fwd(`for=203.0.113.9;ext="x,a\",b", for=10.0.0.6`), "203.0.113.9"},
		{"escaped backslash before the closing quote", tp, peer, fwd(`for=203.0.113.9;ext="a\\", for=10.0.0.6`), "203.0.113.9"},
		{"unclosed quote on the left is not read", tp, peer, fwd(`for="198.51.100.1, for=203.0.113.9`), "203.0.113.9"},
		{"unclosed quote ends the walk", tp, peer, fwd(`for=203.0.113.9;ext="a, for=10.0.0.6`), "10.0.0.6"},
		{"obfuscated identifier ends the walk", tp, peer, fwd("for=203.0.113.9, for=_hidden, for=10.0.0.6"), "10.0.0.6"},
		{"obfuscated rightmost gives the peer", tp, peer, fwd("for=_hidden"), "10.0.0.1"},
		{"quoted obfuscated identifier", tp, peer, fwd(`for="_gazonk"`), "10.0.0.1"},
		{"unknown ends the walk", tp, peer, fwd("for=203.0.113.9, for=unknown, for=10.0.0.6"), "10.0.0.6"},
		{"unknown in any case", tp, peer, fwd("for=203.0.113.9, for=UNKNOWN"), "10.0.0.1"},
		{"element without for ends the walk", tp, peer, fwd("for=203.0.113.9, proto=https;by=10.0.0.6"), "10.0.0.1"},
		{"two for in one element", tp, peer, fwd("for=203.0.113.9;for=198.51.100.1"), "10.0.0.1"},
		{"malformed element mid chain", tp, peer, fwd("for=203.0.113.9, garbage, for=10.0.0.6"), "10.0.0.6"},
		{"empty value", tp, peer, fwd("for="), "10.0.0.1"},
		{"empty quoted value", tp, peer, fwd(`for=""`), "10.0.0.1"},
		{"space in a name", tp, peer, fwd("for =203.0.113.9"), "10.0.0.1"},
		{"junk after a quoted value", tp, peer, fwd(`for="203.0.113.9"x`), "10.0.0.1"},
		{"quote inside an unquoted value", tp, peer, fwd(`for=203.0.113.9"`), "10.0.0.1"},
		{"backslash in a quoted for", tp, peer, fwd(`for="203.0.113.\9"`), "10.0.0.1"},
		{"unquoted ipv6 not bracketed", tp, peer, fwd("for=2001:db8::9"), "2001:db8::9"},
		{"X-Forwarded-For not read", tp, peer, xff("203.0.113.9"), "10.0.0.1"},
	})
}

func TestAddrDepth(t *testing.T) {
	depth := func(d int) Resolver { return Resolver{TrustedProxies: trusted, Depth: d} }
	chain := xff("198.51.100.1, 203.0.113.9, 10.1.1.1")
	peer := "10.0.0.1:5000"
	runAddr(t, []addrCase{
		{"depth 1 is the rightmost, trusted or not", depth(1), peer, chain, "10.1.1.1"},
		{"depth 2", depth(2), peer, chain, "203.0.113.9"},
		{"depth 3", depth(3), peer, chain, "198.51.100.1"},
		{"chain shorter than depth gives the leftmost", depth(4), peer, chain, "198.51.100.1"},
		{"no header gives the peer", depth(2), peer, nil, "10.0.0.1"},
		{"untrusted hops not skipped", depth(1), peer, xff("10.0.0.5, 203.0.113.9"), "203.0.113.9"},
		{"several lines are one list", depth(3), peer, xff("198.51.100.1", "203.0.113.9, 10.1.1.1"), "198.51.100.1"},
		{"empty elements not counted", depth(2), peer, xff("198.51.100.1,, 203.0.113.9,"), "198.51.100.1"},
		{"invalid entry before depth gives the last valid", depth(3), peer, xff("198.51.100.1, garbage, 10.1.1.1"), "10.1.1.1"},
		{"invalid entry at depth gives the last valid", depth(2), peer, xff("garbage, 10.1.1.1"), "10.1.1.1"},
		{"invalid rightmost gives the peer", depth(2), peer, xff("198.51.100.1, garbage"), "10.0.0.1"},
		{"Forwarded", Resolver{TrustedProxies: trusted, Header: "Forwarded", Depth: 2}, peer,
			fwd("for=198.51.100.1, for=203.0.113.9;proto=https, for=10.1.1.1"), "203.0.113.9"},
	})
}

func TestAddrBounds(t *testing.T) {
	tp := Resolver{TrustedProxies: trusted}
	peer := "10.0.0.1:5000"
	hops := func(n int) string {
		h := make([]string, n)
		for i := range h {
			h[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).String()
		}
		return strings.Join(h, ", ")
	}
	runAddr(t, []addrCase{
		{"untrusted hop at 64 is found", tp, peer, xff("203.0.113.9, " + hops(63)), "203.0.113.9"},
		{"untrusted hop at 65 is past the bound", tp, peer, xff("203.0.113.9, " + hops(64)), "10.0.0.0"},
		{"hops counted across lines", tp, peer, xff("203.0.113.9", hops(32), hops(32)), "10.0.0.0"},
		{"depth 64", Resolver{TrustedProxies: trusted, Depth: 64}, peer, xff("203.0.113.9, " + hops(63)), "203.0.113.9"},
		{"chain of 4 KiB is read whole", tp, peer, xff("203.0.113.9" + strings.Repeat(",", maxChainBytes-19) + "10.0.0.6"), "203.0.113.9"},
		// One byte more cuts the leftmost entry to 03.0.113.9: not read.
		{"entry across the 4 KiB edge is not read", tp, peer, xff("203.0.113.9" + strings.Repeat(",", maxChainBytes-18) + "10.0.0.6"), "10.0.0.6"},
		// Cut to 2.0.2.77, a valid address that nobody sent.
		{"cut entry that would parse is not read", tp, peer, xff("192.0.2.77" + strings.Repeat(",", maxChainBytes-16) + "10.0.0.6"), "10.0.0.6"},
		{"the 4 KiB span lines", tp, peer, xff("203.0.113.9", strings.Repeat(",", maxChainBytes-9)+"10.0.0.6"), "10.0.0.6"},
		{"a long element on the left is not read", tp, peer, xff(strings.Repeat("9", 1<<20) + ", 203.0.113.9, 10.0.0.6"), "203.0.113.9"},
		{"a long element ends the walk", tp, peer, xff("203.0.113.9, " + strings.Repeat("9", 1<<20) + ", 10.0.0.6"), "10.0.0.6"},
		{"Forwarded: a long quoted string ends the walk", Resolver{TrustedProxies: trusted, Header: "Forwarded"}, peer,
			fwd(`for=203.0.113.9;ext="` + strings.Repeat(`\"`, 1<<19) + `", for=10.0.0.6`), "10.0.0.6"},
	})
}

// TestAddrAllocations checks that reading a chain allocates nothing, and
// that no header, however long, makes a call allocate more than a failed
// parse's error does.
func TestAddrAllocations(t *testing.T) {
	long := strings.Repeat("9", 1<<20)
	cases := []struct {
		name   string
		r      Resolver
		header map[string][]string
		max    float64
	}{
		{"X-Forwarded-For", Resolver{TrustedProxies: trusted}, xff("198.51.100.1, 203.0.113.9:4711, 10.1.1.1", "[2001:db8:ffff::2]:80"), 0},
		{"Forwarded", Resolver{TrustedProxies: trusted, Header: "Forwarded"}, fwd(`for=198.51.100.1, for="[2001:db8::9]:4711";proto=https`, "for=10.1.1.1;by=10.0.0.1"), 0},
		{"Depth", Resolver{TrustedProxies: trusted, Depth: 2}, xff("198.51.100.1, 203.0.113.9, 10.1.1.1"), 0},
		{"hostile X-Forwarded-For", Resolver{TrustedProxies: trusted}, xff(long, long+","+long), 2},
		{"hostile Forwarded", Resolver{TrustedProxies: trusted, Header: "Forwarded"}, fwd(`for="`+long, long), 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := request(t, "10.0.0.1:5000", c.header)
			if got := testing.AllocsPerRun(100, func() { c.r.Addr(req) }); got > c.max {
				t.Fatalf("got %v allocations per call, want at most %v", got, c.max)
			}
		})
	}
}

func TestFromPeer(t *testing.T) {
	r := Resolver{TrustedProxies: trusted}
	cases := []struct {
		name  string
		peer  netip.Addr
		chain []string
		want  netip.Addr
	}{
		{"untrusted", netip.MustParseAddr("203.0.113.7"), []string{"198.51.100.1"}, netip.MustParseAddr("203.0.113.7")},
		{"trusted", netip.MustParseAddr("10.0.0.1"), []string{"198.51.100.1, 10.0.0.2"}, netip.MustParseAddr("198.51.100.1")},
		{"ipv4-mapped peer", netip.MustParseAddr("::ffff:10.0.0.1"), []string{"198.51.100.1"}, netip.MustParseAddr("198.51.100.1")},
		{"zoned peer", netip.MustParseAddr("fe80::1%eth0"), nil, netip.MustParseAddr("fe80::1")},
		{"invalid peer", netip.Addr{}, []string{"198.51.100.1"}, netip.Addr{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := r.FromPeer(c.peer, c.chain); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		r    Resolver
		want string // a part of the error, or "" for none
	}{
		{"zero", Resolver{}, ""},
		{"full", Resolver{TrustedProxies: trusted, Header: "Forwarded", Depth: 2, IPv4Prefix: 24, IPv6Prefix: 48}, ""},
		{"header in any case", Resolver{Header: "x-FORWARDED-for"}, ""},
		{"prefixes at their ends", Resolver{IPv4Prefix: 32, IPv6Prefix: 128}, ""},
		{"ipv4 prefix too long", Resolver{IPv4Prefix: 33}, "IPv4Prefix 33"},
		{"ipv4 prefix negative", Resolver{IPv4Prefix: -1}, "IPv4Prefix -1"},
		{"ipv6 prefix too long", Resolver{IPv6Prefix: 129}, "IPv6Prefix 129"},
		{"ipv6 prefix negative", Resolver{IPv6Prefix: -8}, "IPv6Prefix -8"},
		{"unsupported header", Resolver{Header: "X-Real-IP"}, `Header "X-Real-IP"`},
		{"depth negative", Resolver{TrustedProxies: trusted, Depth: -1}, "Depth -1"},
		{"depth past the bound", Resolver{TrustedProxies: trusted, Depth: 65}, "Depth 65"},
		{"depth without trusted proxies", Resolver{Depth: 1}, "TrustedProxies is empty"},
		{"zero prefix", Resolver{TrustedProxies: []netip.Prefix{{}}}, "TrustedProxies[0]"},
		{"prefix length out of range", Resolver{TrustedProxies: append(trusted[:1:1], netip.PrefixFrom(netip.MustParseAddr("10.0.0.0"), 33))}, "TrustedProxies[1]"},
		{"ipv4-mapped prefix", Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}}, "write it as IPv4"},
		{"ipv6 prefix covering mapped addresses", Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::/0")}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.r.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case c.want != "" && err == nil:
				t.Fatalf("got no error, want one containing %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			case err != nil && !strings.HasPrefix(err.Error(), "clientip: "):
				t.Fatalf("got %v, want the package's prefix", err)
			}
		})
	}
}
