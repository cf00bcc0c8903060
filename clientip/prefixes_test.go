package clientip

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParsePrefixes(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want []string
	}{
		{"none", nil, []string{}},
		{"cidrs", []string{"10.0.0.0/8", "2001:db8::/32"}, []string{"10.0.0.0/8", "2001:db8::/32"}},
		{"bare ipv4 is /32", []string{"192.0.2.1"}, []string{"192.0.2.1/32"}},
		{"bare ipv6 is /128", []string{"2001:db8::1"}, []string{"2001:db8::1/128"}},
		{"host bits masked", []string{"10.1.2.3/8"}, []string{"10.0.0.0/8"}},
		{"spaces trimmed", []string{" 10.0.0.0/8\t"}, []string{"10.0.0.0/8"}},
		{"ipv4-mapped address unmapped", []string{"::ffff:192.0.2.1"}, []string{"192.0.2.1/32"}},
		{"ipv4-mapped prefix unmapped", []string{"::ffff:10.0.0.0/104"}, []string{"10.0.0.0/8"}},
		{"short ipv6 prefix kept", []string{"::/0"}, []string{"::/0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePrefixes(c.in)
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			want := make([]netip.Prefix, len(c.want))
			for i, s := range c.want {
				want[i] = netip.MustParsePrefix(s)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestParsePrefixesErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want string // a part of the error
	}{
		{"empty entry", []string{"10.0.0.0/8", ""}, `entry 1: ParseAddr("")`},
		{"hostname", []string{"proxy.internal"}, `entry 0: ParseAddr("proxy.internal")`},
		{"ipv4 length out of range", []string{"10.0.0.0/33"}, `entry 0: netip.ParsePrefix("10.0.0.0/33")`},
		{"ipv6 length out of range", []string{"2001:db8::/129"}, `"2001:db8::/129"`},
		{"negative length", []string{"10.0.0.0/-1"}, `"10.0.0.0/-1"`},
		{"zone", []string{"fe80::1%eth0"}, `"fe80::1%eth0": zone not allowed`},
		{"zone in a prefix", []string{"fe80::%eth0/64"}, `"fe80::%eth0/64"`},
		{"port", []string{"10.0.0.1:80"}, `"10.0.0.1:80"`},
		{"second of several", []string{"10.0.0.0/8", "10.0.0.0/8/8", "x"}, "entry 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePrefixes(c.in)
			if err == nil {
				t.Fatalf("got %v and no error, want an error containing %q", got, c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "clientip: ") {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
