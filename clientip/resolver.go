package clientip

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// A Resolver finds a request's client address. Its zero value is ready to
// use and trusts no proxy. A Resolver is safe for concurrent use as long
// as its fields are not modified.
type Resolver struct {
	// TrustedProxies are the peers whose forwarding header is believed.
	// When empty (the default), no header is ever read and the client is
	// the socket peer.
	//
	// Security: a forwarding header is only as true as whoever wrote it,
	// and any client can write one. go-chi/httprate deprecated its
	// KeyByRealIP because it believed X-Forwarded-For and X-Real-IP from
	// anyone, so that a client could pick its own key and escape its limit,
	// or spend another client's (GHSA-9g5q-2w5x-hmxf). That is why the
	// default trusts nothing. List only proxies that append the address of
	// their own peer to the header (nginx's $proxy_add_x_forwarded_for,
	// HAProxy's option forwardfor), never a host that sends requests of its
	// own: whatever a trusted address puts in the header is believed.
	//
	// An IPv4 peer matches IPv4 prefixes only (IPv4-mapped IPv6 peers are
	// unmapped first); ParsePrefixes converts a mapped prefix such as
	// ::ffff:10.0.0.0/104 to 10.0.0.0/8, and Validate rejects one.
	TrustedProxies []netip.Prefix

	// Header names the forwarding header read from a trusted peer:
	// "X-Forwarded-For" (the default, when empty) or "Forwarded" (RFC
	// 7239, its for= parameters), in any case. Any other name is reported
	// by Validate, and a Resolver holding one reads no header.
	//
	// Several lines of the header are one list, in order. Entries may
	// carry a port (in Forwarded, an obfuscated one too), and IPv6 entries
	// may be bracketed or not; a Forwarded value is read alike quoted or
	// not. A hop whose address is not known ends the walk as an invalid
	// entry does (see FromPeer): in Forwarded, "unknown", an obfuscated
	// identifier such as "_hidden", or an element without for=, or with
	// two; in either header, anything that is not an address. The client
	// is then the trusted proxy that wrote that hop (the last address read,
	// or the peer), so that every client it hides shares the proxy's limit
	// rather than escaping all limits.
	Header string

	// Depth, when positive, replaces skipping trusted hops: the client is
	// the entry Depth positions from the right end of the chain (1 is the
	// rightmost, written by the peer itself), whatever its address, as
	// Traefik's ipStrategy.depth picks it. The header is still read only
	// when the socket peer is trusted. A chain shorter than Depth gives
	// its leftmost entry, and an invalid entry before Depth the last valid
	// one to its right, as in the default walk. Validate accepts 0 to 64,
	// and a positive Depth only with TrustedProxies.
	//
	// Security: Depth believes the topology, not addresses. It is right
	// only if every request reaches the peer through exactly Depth
	// proxies, each appending one entry; a client that can reach the peer
	// past the outer ones can put any address at Depth. So the leftmost
	// entry of a short chain gives nothing up: a client able to shorten
	// the chain could as well pad it, while an honest short chain (a
	// caller inside, past the outer proxies) has its true client there.
	// Prefer listing the proxies in TrustedProxies when their addresses
	// are known.
	Depth int

	// IPv4Prefix is how many leading bits of an IPv4 address identify one
	// client in Key: 1 to 32, 0 meaning 32.
	IPv4Prefix int

	// IPv6Prefix is how many leading bits of an IPv6 address identify one
	// client in Key: 1 to 128, 0 meaning 64, the network one subscriber is
	// usually given whole.
	IPv6Prefix int
}

// Validate reports the first field of r that is out of range. Addr, Key
// and their siblings never fail: on a Resolver that does not validate,
// they read no header for an unknown Header, use the default for a prefix
// length out of range, and never match an invalid trusted prefix.
func (r *Resolver) Validate() error {
	if r.IPv4Prefix < 0 || r.IPv4Prefix > 32 {
		return fmt.Errorf("clientip: IPv4Prefix %d: want 1 to 32, or 0 for 32", r.IPv4Prefix)
	}
	if r.IPv6Prefix < 0 || r.IPv6Prefix > 128 {
		return fmt.Errorf("clientip: IPv6Prefix %d: want 1 to 128, or 0 for 64", r.IPv6Prefix)
	}
	if r.syntax() == noHeader {
		return fmt.Errorf("clientip: Header %q: want X-Forwarded-For or Forwarded", r.Header)
	}
	if r.Depth < 0 || r.Depth > maxHops {
		return fmt.Errorf("clientip: Depth %d: want 0 to %d", r.Depth, maxHops)
	}
	if r.Depth > 0 && len(r.TrustedProxies) == 0 {
		return errors.New("clientip: Depth is set but TrustedProxies is empty, so no header would be read")
	}
	for i, p := range r.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("clientip: TrustedProxies[%d]: invalid prefix %s", i, p)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			return fmt.Errorf("clientip: TrustedProxies[%d]: %s is IPv4-mapped and would match no peer; write it as IPv4", i, p)
		}
	}
	return nil
}

// Addr returns the address of req's client: the socket peer
// (req.RemoteAddr, host:port or a bare address; an IPv4-mapped address is
// unmapped and a zone dropped), or, when the peer is a trusted proxy,
// what its forwarding header says, as FromPeer reads it. An invalid
// RemoteAddr gives the zero Addr.
func (r *Resolver) Addr(req *http.Request) netip.Addr {
	return r.FromPeer(peerOf(req.RemoteAddr), req.Header[r.syntax().name()])
}

// FromPeer returns the client's address for a request received from peer
// with the forwarding header's lines chain (for gRPC, the peer's address
// and the x-forwarded-for metadata values), in the syntax Header names.
//
// When peer is not in TrustedProxies, the client is peer and chain is not
// read. Otherwise chain is read right to left: every hop that is a
// trusted proxy is skipped and the first that is not is the client; if
// every hop is trusted, the leftmost is. The walk ends early at an
// invalid entry, a hop of unknown address (see Header), after 64 hops or
// after 4 KiB of chain, counted from the right end; the client is then
// the last address read, or peer if none was. Empty list elements are
// skipped. With Depth set, see Depth. An invalid peer gives the zero Addr.
func (r *Resolver) FromPeer(peer netip.Addr, chain []string) netip.Addr {
	peer = peer.Unmap().WithZone("")
	if !peer.IsValid() || !r.trusts(peer) {
		return peer
	}
	syntax := r.syntax()
	if syntax == noHeader {
		return peer
	}
	w := walker{lines: chain, line: len(chain), budget: maxChainBytes, quoted: syntax == forwarded}
	client := peer
	for hops := 1; hops <= maxHops; hops++ {
		a, ok := w.next()
		if !ok {
			break
		}
		client = a
		if r.Depth > 0 {
			if hops == r.Depth {
				break
			}
		} else if !r.trusts(a) {
			break
		}
	}
	return client
}

// trusts reports whether a is in one of the trusted prefixes.
func (r *Resolver) trusts(a netip.Addr) bool {
	for _, p := range r.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// headerSyntax is the forwarding header a Resolver reads.
type headerSyntax int

const (
	noHeader headerSyntax = iota
	xForwardedFor
	forwarded
)

func (r *Resolver) syntax() headerSyntax {
	switch {
	case r.Header == "" || strings.EqualFold(r.Header, "X-Forwarded-For"):
		return xForwardedFor
	case strings.EqualFold(r.Header, "Forwarded"):
		return forwarded
	}
	return noHeader
}

// name is the header's canonical key in an http.Header.
func (s headerSyntax) name() string {
	switch s {
	case xForwardedFor:
		return "X-Forwarded-For"
	case forwarded:
		return "Forwarded"
	}
	return ""
}

// peerOf parses a RemoteAddr.
func peerOf(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr()
	}
	a, _ := netip.ParseAddr(remote)
	return a
}
