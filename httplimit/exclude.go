package httplimit

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/bouncerhq/bouncer/clientip"
)

// ExcludePaths excludes requests whose canonical path (see Route) is one
// of paths, or, for a path ending in "/", starts with it:
// ExcludePaths("/healthz", "/static/"). Matching the canonical path keeps
// /static/../api/expensive from passing as a static file. paths are
// compared as written: give them in canonical form (no "//", "." or
// ".." segments).
func ExcludePaths(paths ...string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		c := canonicalPath(r)
		for _, p := range paths {
			if c == p || strings.HasSuffix(p, "/") && strings.HasPrefix(c, p) {
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
