package route_test

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/internal/urlpath"
)

func TestNewView(t *testing.T) {
	trusting := &clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	for _, tc := range []struct {
		name           string
		target         string
		remote         string
		res            *clientip.Resolver
		header         []string
		host, path     string
		client         string
		err            error
		rawPath, upath string // r.URL after NewView
	}{
		{name: "plain", target: "/api/v1", remote: "192.0.2.1:5", host: "api.test", path: "/api/v1", client: "192.0.2.1", rawPath: "/api/v1", upath: "/api/v1"},
		{name: "host", target: "/", remote: "192.0.2.1:5", header: []string{"Host", "API.Test.:8443"}, host: "api.test", path: "/", client: "192.0.2.1", rawPath: "/", upath: "/"},
		{name: "spelled", target: "/api//v1/./x/../%75sers", remote: "192.0.2.1:5", host: "api.test", path: "/api/v1/users", client: "192.0.2.1", rawPath: "/api/v1/users", upath: "/api/v1/users"},
		{name: "encoded slash", target: "/a%2fb", remote: "192.0.2.1:5", host: "api.test", path: "/a%2Fb", client: "192.0.2.1", rawPath: "/a%2Fb", upath: "/a/b"},
		{name: "untrusted peer's forwarding header", target: "/", remote: "192.0.2.1:5", header: []string{"X-Forwarded-For", "203.0.113.1"}, host: "api.test", path: "/", client: "192.0.2.1", rawPath: "/", upath: "/"},
		{name: "trusted peer's forwarding header", target: "/", remote: "10.1.1.1:5", res: trusting, header: []string{"X-Forwarded-For", "203.0.113.1"}, host: "api.test", path: "/", client: "203.0.113.1", rawPath: "/", upath: "/"},
		{name: "refused", target: "/a/..;/b", remote: "192.0.2.1:5", host: "api.test", client: "192.0.2.1", err: urlpath.ErrDotParams, rawPath: "", upath: "/a/..;/b"},
		{name: "not a path", target: "*", remote: "192.0.2.1:5", host: "api.test", client: "192.0.2.1", upath: "*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tc.target, nil)
			r.Host, r.RemoteAddr = "api.test", tc.remote
			for i := 0; i+1 < len(tc.header); i += 2 {
				if tc.header[i] == "Host" {
					r.Host = tc.header[i+1]
					continue
				}
				r.Header.Set(tc.header[i], tc.header[i+1])
			}
			r.Header.Set("X_Forwarded_For", "203.0.113.2")
			r.Header.Set("True-Client-Ip", "203.0.113.3")
			v, err := route.NewView(r, tc.res)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if v.Host != tc.host || v.Path != tc.path || v.Client.String() != tc.client {
				t.Errorf("view {%q %q %s}, want {%q %q %s}", v.Host, v.Path, v.Client, tc.host, tc.path, tc.client)
			}
			if r.URL.RawPath != tc.rawPath || r.URL.Path != tc.upath {
				t.Errorf("request path %q (raw %q), want %q (raw %q)", r.URL.Path, r.URL.RawPath, tc.upath, tc.rawPath)
			}
			for _, h := range []string{"X-Forwarded-For", "X_Forwarded_For", "True-Client-Ip"} {
				if v, ok := r.Header[h]; ok {
					t.Errorf("%s %q left on the request, want it dropped", h, v)
				}
			}
		})
	}
}

func TestDropHeaders(t *testing.T) {
	h := http.Header{
		"X-Bouncer-Subject": {"a"}, "X_bouncer_plan": {"b"}, "x_BOUNCER-auth_method": {"c"},
		"X-Api-Key": {"k"}, "X_api_key": {"k"}, "X-Api-Keys": {"kept"},
		"X-Bounce": {"kept"}, "Accept": {"kept"},
		"Connection": {"keep-alive, X-Bouncer-Subject", "X_Api_Key", "X-Other"},
	}
	route.DropHeaders(h, "X-Bouncer-", "X-API-Key")
	want := http.Header{"X-Api-Keys": {"kept"}, "X-Bounce": {"kept"}, "Accept": {"kept"}, "Connection": {"keep-alive", "", "X-Other"}}
	if len(h) != len(want) {
		t.Fatalf("got %v, want %v", h, want)
	}
	for k, v := range want {
		if strings.Join(h[k], "|") != strings.Join(v, "|") {
			t.Errorf("%s: got %q, want %q", k, h[k], v)
		}
	}
}

// capture is a transport that answers every request itself and records
// the target each would have had on the wire.
type capture struct {
	mu      sync.Mutex
	targets []string
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	c.mu.Lock()
	c.targets = append(c.targets, r.URL.Host+r.URL.EscapedPath()) // the query is not counted
	c.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// sent reads target as a server would, makes its View and proxies it
// through table, and returns the View's path (what limits count) and the
// target the upstream received; ok is false if the request is refused.
func sent(t *testing.T, table *route.Table, c *capture, target string) (key, upstream string, ok bool) {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: api.test\r\n\r\n")))
	if err != nil {
		return "", "", false // net/http answers 400 itself
	}
	r.RemoteAddr = "192.0.2.1:5"
	v, err := route.NewView(r, nil)
	if err != nil {
		return "", "", false
	}
	tgt := table.Lookup(&v)
	if tgt == nil {
		return "", "", false
	}
	c.mu.Lock()
	c.targets = nil
	c.mu.Unlock()
	w := httptest.NewRecorder()
	tgt.Serve(w, r, &v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.Code != 200 || len(c.targets) != 1 {
		t.Fatalf("%s: proxied %d times, answered %d", target, len(c.targets), w.Code)
	}
	return v.Path, c.targets[0], true
}

// FuzzView holds the gateway's one view of a request to its promise: two
// requests the upstream cannot tell apart are never counted under
// different keys, and two spellings of one path that RFC 3986 calls equal
// are counted, and sent, as one.
func FuzzView(f *testing.F) {
	c := &capture{}
	table, err := route.New([]route.Route{
		{Name: "strip", PathPrefix: "/s/", StripPrefix: true, Upstreams: []string{"http://strip.test/base"}},
		{Name: "all", PathPrefix: "/", Upstreams: []string{"http://up.test"}},
	}, route.Options{Transport: c, Logger: discard()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(table.Close)
	for _, s := range [][2]string{
		{"/p/expensive", "/p//expensive"}, {"/p/expensive", "/p/./expensive"}, {"/p/expensive", "/p/x/../expensive"},
		{"/p/expensive", "/p/%65xpensive"}, {"/a%2Fb", "/a%2fb"}, {"/s/x", "/s//x"}, {"/s/", "/s"}, {"/caf%C3%A9", "/caf%c3%a9"},
		{"/a;b", "/a%3Bb"}, {"/%7Euser", "/~user"}, {"/s/../x", "/x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, ua, oka := sent(t, table, c, a)
		kb, ub, okb := sent(t, table, c, b)
		if !oka || !okb {
			return
		}
		if ua == ub && ka != kb {
			t.Fatalf("%q and %q reach the upstream alike (%q) but are counted as %q and %q", a, b, ua, ka, kb)
		}
		if ka == kb && ua != ub {
			t.Fatalf("%q and %q are counted as one (%q) but the upstream gets %q and %q", a, b, ka, ua, ub)
		}
		// The key is what the upstream would read as the path: its
		// canonical form is the key's.
		for _, s := range [][2]string{{a, ka}, {b, kb}} {
			if again, _ := urlpath.Canonical(s[1]); again != s[1] {
				t.Fatalf("%q is counted as %q, which is not canonical (%q)", s[0], s[1], again)
			}
		}
	})
}
