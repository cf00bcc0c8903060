package httplimit

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/bouncerhq/bouncer/clientip"
)

// ExcludePaths excludes requests whose URL path is one of paths, or, for
// a path ending in "/", starts with it: ExcludePaths("/healthz",
// "/static/").
func ExcludePaths(paths ...string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		for _, p := range paths {
			if r.URL.Path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(r.URL.Path, p) {
				return true
			}
		}
		return false
	}
}

// ExcludeMethods excludes requests of the given methods, such as
// http.MethodOptions for CORS preflights.
func ExcludeMethods(methods ...string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		for _, m := range methods {
			if r.Method == m {
				return true
			}
		}
		return false
	}
}

// ExcludeIPs excludes requests from clients in allow, an allowlist of
// networks, with the client's address as res resolves it (nil: the zero
// Resolver, the socket's peer).
func ExcludeIPs(res *clientip.Resolver, allow []netip.Prefix) func(*http.Request) bool {
	if res == nil {
		res = &clientip.Resolver{}
	}
	return func(r *http.Request) bool {
		a := res.Addr(r)
		if !a.IsValid() {
			return false
		}
		for _, p := range allow {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
}

// AnyOf excludes a request that any of fns excludes.
func AnyOf(fns ...func(*http.Request) bool) func(*http.Request) bool {
	return func(r *http.Request) bool {
		for _, f := range fns {
			if f(r) {
				return true
			}
		}
		return false
	}
}
