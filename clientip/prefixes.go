package clientip

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParsePrefixes parses a list of trusted proxies, as for TrustedProxies:
// each entry a CIDR prefix (10.0.0.0/8, 2001:db8::/32; host bits are
// masked off) or a bare address, which stands for itself alone (/32 or
// /128). Spaces around an entry are ignored. An IPv4-mapped prefix or
// address is converted to IPv4, the form peers are matched in. An entry
// with a zone is rejected: peers are matched without theirs. The error
// names the first entry that does not parse.
func ParsePrefixes(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for i, s := range cidrs {
		p, err := parsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("clientip: entry %d: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q: zone not allowed", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}
