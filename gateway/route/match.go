package route

import (
	"cmp"
	"net/http"
	"strings"

	"github.com/bouncerhq/bouncer/internal/urlpath"
)

// Host classes, from the least specific.
const (
	anyHost = iota
	wildcardHost
	exactHost
)

// matcher is the part of a route that Lookup compares with requests.
type matcher struct {
	class  int
	host   string // exactHost: the host; wildcardHost: the suffix, ".example.com"
	prefix string
}

func newMatcher(r *Route) matcher {
	m := matcher{class: anyHost, prefix: r.PathPrefix}
	switch {
	case strings.HasPrefix(r.Host, "*."):
		m.class, m.host = wildcardHost, strings.ToLower(r.Host[1:])
	case r.Host != "":
		m.class, m.host = exactHost, strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(r.Host, "["), "]"))
	}
	return m
}

// compareMatchers orders matchers as Lookup tries them: exact hosts, then
// wildcards (the longest suffix first), then any host; within each, the
// longest prefix first.
func compareMatchers(a, b matcher) int {
	if c := cmp.Compare(b.class, a.class); c != 0 {
		return c
	}
	if c := cmp.Compare(len(b.host), len(a.host)); c != 0 {
		return c
	}
	return cmp.Compare(len(b.prefix), len(a.prefix))
}

// matches reports whether a request for host (without its port) and the
// canonical path p belongs to the route.
func (m *matcher) matches(host, p string) bool {
	switch m.class {
	case exactHost:
		if !strings.EqualFold(host, m.host) {
			return false
		}
	case wildcardHost:
		if len(host) <= len(m.host) || !strings.EqualFold(host[len(host)-len(m.host):], m.host) {
			return false
		}
	}
	return urlpath.HasPrefix(p, m.prefix)
}

// requestHost is r's host without port, brackets or a final dot.
func requestHost(r *http.Request) string {
	h := r.Host
	if h == "" && r.URL != nil {
		h = r.URL.Host
	}
	if rest, ok := strings.CutPrefix(h, "["); ok {
		h, _, _ = strings.Cut(rest, "]")
	} else if i := strings.IndexByte(h, ':'); i >= 0 && strings.LastIndexByte(h, ':') == i {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// stripPrefix removes prefix from p, which has it, keeping a leading "/".
func stripPrefix(p, prefix string) string {
	rest := p[len(prefix):]
	if !strings.HasPrefix(rest, "/") {
		return "/" + rest
	}
	return rest
}
