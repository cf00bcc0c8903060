package httplimit

import (
	"net/http"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/internal/edge"
	"github.com/bouncerhq/bouncer/internal/urlpath"
)

// A KeyFunc says whose count a request is charged to under a rule: it
// returns the key's value, or false if the rule does not apply to the
// request (an API-key rule for a request without a key). Values may come
// from the client: the middleware escapes and bounds them before they
// reach a store (long values are kept as a digest), so a value cannot
// fake another key.
type KeyFunc func(r *http.Request) (string, bool)

// Global counts every request under one key.
func Global() KeyFunc {
	return func(*http.Request) (string, bool) { return "", true }
}

// IP counts each client address, grouped to its network (a /64 for IPv6
// by default), as res resolves it. A nil res is the zero Resolver, which
// trusts no proxy: the key is the socket's peer, whatever the request's
// forwarding headers say. Behind a proxy, set res.TrustedProxies.
func IP(res *clientip.Resolver) KeyFunc {
	if res == nil {
		res = &clientip.Resolver{}
	}
	return func(r *http.Request) (string, bool) {
		k := res.Key(r)
		return k, k != ""
	}
}

// Header counts each value of the request header name; a request without
// it is not counted by the rule.
func Header(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, bool) {
		v := r.Header.Get(name)
		return v, v != ""
	}
}

// Query counts each value of the URL query parameter name; a request
// without it is not counted by the rule.
func Query(name string) KeyFunc {
	return func(r *http.Request) (string, bool) {
		v := r.URL.Query().Get(name)
		return v, v != ""
	}
}

// APIKey counts each API key, taken from the header (such as "X-API-Key")
// or, if the request has none, from the query parameter; either may be
// "" to not look there. The key is counted as sent: a rule keyed on a
// client-chosen value limits that value, so limit by a verified identity
// (User) where an invented key must not buy a fresh quota.
func APIKey(header, query string) KeyFunc {
	var h, q KeyFunc
	if header != "" {
		h = Header(header)
	}
	if query != "" {
		q = Query(query)
	}
	return func(r *http.Request) (string, bool) {
		if h != nil {
			if v, ok := h(r); ok {
				return v, true
			}
		}
		if q != nil {
			return q(r)
		}
		return "", false
	}
}

// User counts each verified user, as authentication middleware in front
// of this one recorded with bouncer.WithUser; a request without one is not
// counted by the rule.
func User() KeyFunc {
	return func(r *http.Request) (string, bool) { return bouncer.UserFrom(r.Context()) }
}

// Route counts each route: the pattern of http.ServeMux that matched the
// request (Request.Pattern, set when the middleware wraps a handler the
// mux chose), so that "/users/{id}" is one count and not one per id where
// the mux routes first; or else the request's path in its canonical
// form: percent-encodings of unreserved characters decoded and the
// others' hex digits upper-cased, "." and ".." segments resolved and "//"
// collapsed. So /p//expensive, /p/./expensive and /p/x/../expensive are
// one count with /p/expensive, as a handler behind that cleans paths (a
// router, a reverse proxy) serves them as one.
func Route() KeyFunc {
	return func(r *http.Request) (string, bool) {
		if r.Pattern != "" {
			return r.Pattern, true
		}
		return canonicalPath(r), true
	}
}

// canonicalPath is r's path in its canonical form (package urlpath); a
// path urlpath refuses is counted by the form it returns all the same.
func canonicalPath(r *http.Request) string {
	p, _ := urlpath.Canonical(r.URL.EscapedPath())
	return p
}

// Method counts each HTTP method.
func Method() KeyFunc {
	return func(r *http.Request) (string, bool) { return r.Method, true }
}

// Compose counts each combination of the values of fns, such as a user on
// one route: Compose(User(), Route()). The rule applies only to requests
// that every fn applies to.
func Compose(fns ...KeyFunc) KeyFunc { return edge.Compose(fns) }
