package route

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/internal/urlpath"
)

// View is the one view of a request that routing, authentication, limits,
// the access log and the proxy share, read once when the request
// arrives, so that no part reads a raw field of the request that another
// reads cleaned.
type View struct {
	// Host is the request's host, lower-case, without its port, brackets
	// or final dot: what routes match.
	Host string

	// Path is the canonical form of the request's path (percent-encoding
	// normalised, "." and ".." resolved, "//" collapsed): what routes
	// match and limits count, what the access log shows, and what the
	// upstream receives, below the route's prefix if it strips it and
	// the upstream's base path.
	Path string

	// Client is the client's address, as the limits count it: the socket
	// peer, or what a trusted proxy's forwarding header says. The
	// upstream is told it in X-Forwarded-For and Forwarded.
	Client netip.Addr
}

// forwardingHeaders tell an upstream who the client is. The gateway sets
// X-Forwarded-For, -Host, -Proto and Forwarded from the View; the rest are
// dropped, since a client could write them too.
var forwardingHeaders = []string{"Forwarded", "X-Forwarded-", "X-Real-Ip", "X-Client-Ip", "True-Client-Ip",
	"Cf-Connecting-Ip", "Fastly-Client-Ip", "X-Cluster-Client-Ip", "X-Original-Forwarded-For", "Client-Ip"}

// NewView reads r's view, its client resolved by res (nil: the socket
// peer), and makes r agree with it: r.URL's path becomes the canonical
// one, and the headers that tell an upstream who the client is
// (Forwarded, X-Forwarded-*, X-Real-Ip, True-Client-Ip, CF-Connecting-IP
// and their kin) are removed in every spelling (see DropHeaders): the
// proxy sets its own from the View.
//
// A path that servers read in ways a canonical form cannot stand for (a
// control character or %00, a backslash, a double encoding, "..;", an
// encoded slash beside a dot segment) is refused: the error wraps one of
// package urlpath's, and the request should be answered 400. A request
// whose target is not a path (CONNECT, OPTIONS *) gets a View with an
// empty Path, which no route matches.
func NewView(r *http.Request, res *clientip.Resolver) (View, error) {
	var v View
	if res == nil {
		res = &clientip.Resolver{}
	}
	v.Client = res.Addr(r)
	DropHeaders(r.Header, forwardingHeaders...)
	v.Host = requestHost(r)
	if r.URL == nil || !strings.HasPrefix(r.URL.Path, "/") {
		return v, nil
	}
	p, err := urlpath.Canonical(r.URL.EscapedPath())
	if err != nil {
		return v, err
	}
	v.Path = p
	if r.URL.RawPath != p {
		r.URL.Path, r.URL.RawPath = urlpath.Decode(p), p
	}
	return v, nil
}

// DropHeaders removes from h every header that one of names names,
// compared without regard to case and with '_' read as '-' (CGI, WSGI and
// Rack servers read X_Forwarded_For as X-Forwarded-For); a name ending in
// '-' names every header it begins ("X-Bouncer-"). It also takes those
// names out of the Connection header, so that a client cannot have a
// header the gateway sets later removed as hop-by-hop.
func DropHeaders(h http.Header, names ...string) {
	for k := range h {
		if matchesAny(k, names) {
			delete(h, k)
		}
	}
	conn := h["Connection"]
	for i, v := range conn {
		if !strings.Contains(v, ",") && !matchesAny(strings.TrimSpace(v), names) {
			continue
		}
		var kept []string
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" && !matchesAny(tok, names) {
				kept = append(kept, tok)
			}
		}
		conn[i] = strings.Join(kept, ", ")
	}
}

func matchesAny(name string, names []string) bool {
	for _, n := range names {
		if strings.HasSuffix(n, "-") {
			if len(name) >= len(n) && sameName(name[:len(n)], n) {
				return true
			}
		} else if len(name) == len(n) && sameName(name, n) {
			return true
		}
	}
	return false
}

// sameName reports whether header names a and b, of one length, are the
// same to a server that ignores case and reads '_' as '-'.
func sameName(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
