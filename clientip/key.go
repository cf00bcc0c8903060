package clientip

import (
	"net/http"
	"net/netip"
)

// Key returns the key of req's client for a limit per client IP: its
// address, as Addr finds it, grouped as KeyOf groups it. It returns "" if
// req gives no valid address.
func (r *Resolver) Key(req *http.Request) string {
	return r.KeyOf(r.Addr(req))
}

// KeyOf returns a as a stable key: the address itself when its prefix
// length (IPv4Prefix or IPv6Prefix) covers every bit, as in 203.0.113.7,
// and otherwise its network, as in 2001:db8:1:2::/64, so that every
// address of one network gives the same key. An IPv4-mapped address is
// unmapped and a zone dropped first. An invalid a gives "", which callers
// take as no key.
func (r *Resolver) KeyOf(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if !a.IsValid() {
		return ""
	}
	bits := r.IPv6Prefix
	if a.Is4() {
		bits = r.IPv4Prefix
		if bits <= 0 || bits > 32 {
			bits = 32
		}
	} else if bits <= 0 || bits > 128 {
		bits = 64
	}
	if bits == a.BitLen() {
		return a.String()
	}
	p, _ := a.Prefix(bits)
	return p.String()
}
