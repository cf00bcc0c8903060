package clientip

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// FuzzAddr checks, for any peer and header lines, that Addr does not
// panic, that its answer is the peer or an address the header holds, that
// an untrusted peer is always the answer, and, for chains the bounds do
// not cut, that it agrees with reference, a naive model of the walk.
func FuzzAddr(f *testing.F) {
	f.Add("10.0.0.1:80", "198.51.100.1, 203.0.113.9", "10.1.1.1", false, uint8(0))
	f.Add("203.0.113.7:80", "198.51.100.1", "", false, uint8(0))
	f.Add("[2001:db8:ffff::1]:443", "[2001:db8::9]:4711, unknown", "::ffff:10.0.0.6", false, uint8(2))
	f.Add("10.0.0.1:80", `for=198.51.100.1, for="[2001:db8::9]:4711";proto=https`, "For=10.1.1.1;by=_x", true, uint8(0))
	f.Add("10.0.0.1:80", `for="198.51.100.1, for=_hidden;ext="a\",b", for=203.0.113.9`, `for="10.0.0.6:_p"`, true, uint8(1))
	f.Add("[::ffff:10.0.0.1]:80", "192.0.2.1,,fe80::1%eth0", "10.0.0.5 ,\t10.0.0.6", false, uint8(3))
	f.Add("10.0.0.0:1", "::% 0", "", false, uint8(0))
	f.Fuzz(func(t *testing.T, remote, line1, line2 string, useForwarded bool, depth uint8) {
		r := Resolver{TrustedProxies: trusted, Depth: int(depth % (maxHops + 1))}
		name := "X-Forwarded-For"
		if useForwarded {
			r.Header, name = "Forwarded", "Forwarded"
		}
		lines := []string{line1, line2}
		got := r.Addr(request(t, remote, map[string][]string{name: lines}))

		peer := peerOf(remote).Unmap().WithZone("")
		if !peer.IsValid() || !r.trusts(peer) {
			if got != peer {
				t.Fatalf("peer %v is not trusted: got %v, want the peer", peer, got)
			}
			return
		}
		if got != peer && !naiveAddrs(lines)[got] {
			t.Fatalf("got %v, which is neither the peer %v nor in the header %q", got, peer, lines)
		}
		if len(line1)+len(line2) > maxChainBytes || useForwarded && strings.ContainsAny(line1+line2, `"\`) {
			return // cut by the bounds, or quoted strings the model does not split
		}
		if want := reference(&r, peer, lines); got != want {
			t.Fatalf("header %q: got %v, want %v", lines, got, want)
		}
	})
}

// reference is the walk written plainly: every element of the chain in
// a slice, right to left, for a chain within maxChainBytes and, for
// Forwarded, without quoted strings.
func reference(r *Resolver, peer netip.Addr, lines []string) netip.Addr {
	var elems []string
	for _, l := range lines {
		for _, e := range strings.Split(l, ",") {
			if e = strings.Trim(e, " \t"); e != "" {
				elems = append(elems, e)
			}
		}
	}
	slices.Reverse(elems)
	client := peer
	for i, e := range elems {
		if i == maxHops {
			break
		}
		if r.Header == "Forwarded" {
			var ok bool
			if e, ok = forwardedFor(e); !ok {
				break
			}
		}
		a, ok := parseNode(e)
		if !ok {
			break
		}
		client = a
		if r.Depth > 0 && i+1 == r.Depth || r.Depth == 0 && !r.trusts(a) {
			break
		}
	}
	return client
}

// naiveAddrs returns every address that can be read in lines, loosely:
// a superset of what a walk may answer.
func naiveAddrs(lines []string) map[netip.Addr]bool {
	set := map[netip.Addr]bool{}
	for _, l := range lines {
		for _, tok := range strings.FieldsFunc(l, func(c rune) bool { return strings.ContainsRune(",; \t=\"", c) }) {
			cands := []string{tok, strings.Trim(tok, "[]")}
			if ap, err := netip.ParseAddrPort(tok); err == nil {
				cands = append(cands, ap.Addr().String())
			}
			if host, _, ok := strings.Cut(tok, "]"); ok {
				cands = append(cands, strings.TrimPrefix(host, "["))
			}
			if host, _, ok := strings.Cut(tok, "%"); ok {
				cands = append(cands, strings.TrimPrefix(host, "["))
			}
			if host, _, ok := strings.Cut(tok, ":"); ok {
				cands = append(cands, host)
			}
			for _, c := range cands {
				if a, err := netip.ParseAddr(c); err == nil {
					set[a.Unmap().WithZone("")] = true
				}
			}
		}
	}
	return set
}
