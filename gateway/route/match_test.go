package route_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/route"
)

// nowhere is an upstream Lookup tests never reach.
var nowhere = []string{"http://127.0.0.1:1"}

func TestLookup(t *testing.T) {
	table := newTable(t, []route.Route{
		{Name: "root", PathPrefix: "/", Upstreams: nowhere},
		{Name: "api", PathPrefix: "/api", Upstreams: nowhere},
		{Name: "api-v2", PathPrefix: "/api/v2/", Upstreams: nowhere},
		{Name: "wild", Host: "*.example.com", PathPrefix: "/", Upstreams: nowhere},
		{Name: "wild-api", Host: "*.Example.com", PathPrefix: "/api", Upstreams: nowhere},
		{Name: "deep-wild", Host: "*.eu.example.com", PathPrefix: "/", Upstreams: nowhere},
		{Name: "shop", Host: "shop.example.com", PathPrefix: "/cart", Upstreams: nowhere},
		{Name: "loopback", Host: "::1", PathPrefix: "/", Upstreams: nowhere},
	}, route.Options{})
	for _, tc := range []struct {
		host, path string
		want       string
	}{
		{"other.org", "/", "root"},
		{"other.org", "/api", "api"},
		{"other.org", "/api/", "api"},
		{"other.org", "/api/users", "api"},
		{"other.org", "/apiary", "root"},
		{"other.org", "/api/v2", "api"}, // "/api/v2/" needs its slash
		{"other.org", "/api/v2/", "api-v2"},
		{"other.org", "/api/v2/users", "api-v2"},
		{"other.org", "/public/../api/v2/users", "api-v2"}, // matched clean
		{"other.org", "//api", "api"},
		{"other.org:8080", "/api", "api"},
		{"shop.example.com", "/cart", "shop"},
		{"SHOP.Example.COM:8443", "/cart/1", "shop"},
		{"shop.example.com.", "/cart", "shop"},
		{"shop.example.com", "/carts", "wild"},
		{"shop.example.com", "/api/x", "wild-api"}, // an exact host without the path falls back to the wildcard
		{"a.b.example.com", "/", "wild"},
		{"x.eu.example.com", "/api", "deep-wild"}, // the longer wildcard first, whatever the path
		{"example.com", "/api", "api"},            // a wildcard does not match its apex
		{"notexample.com", "/", "root"},
		{"[::1]:8080", "/x", "loopback"},
		{"[::1]", "/x", "loopback"},
	} {
		t.Run(tc.host+tc.path, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host, r.URL.Path = tc.host, tc.path
			target := lookup(t, table, r)
			if target == nil {
				t.Fatalf("got no route, want %q", tc.want)
			}
			if target.Route.Name != tc.want {
				t.Errorf("got route %q, want %q", target.Route.Name, tc.want)
			}
		})
	}
}

func TestLookupAllocs(t *testing.T) {
	table := newTable(t, []route.Route{
		{Name: "api", Host: "*.example.com", PathPrefix: "/api", Upstreams: nowhere},
		{Name: "root", PathPrefix: "/", Upstreams: nowhere},
	}, route.Options{})
	r := httptest.NewRequest(http.MethodGet, "http://shop.example.com:8443/api/v1/users", nil)
	if n := testing.AllocsPerRun(100, func() {
		v, _ := route.NewView(r, nil)
		table.Lookup(&v)
	}); n != 0 {
		t.Errorf("got %v allocations per NewView and Lookup, want 0", n)
	}
}

func TestLookupNoMatch(t *testing.T) {
	table := newTable(t, []route.Route{
		{Name: "api", PathPrefix: "/api", Upstreams: nowhere},
		{Name: "shop", Host: "shop.example.com", PathPrefix: "/", Upstreams: nowhere},
	}, route.Options{})
	for _, tc := range []struct {
		name string
		r    *http.Request
	}{
		{"other path", &http.Request{Method: "GET", Host: "other.org", URL: &url.URL{Path: "/web"}}},
		{"other host", &http.Request{Method: "GET", Host: "www.example.com", URL: &url.URL{Path: "/"}}},
		{"OPTIONS *", &http.Request{Method: "OPTIONS", Host: "shop.example.com", URL: &url.URL{Path: "*"}}},
		{"CONNECT", &http.Request{Method: "CONNECT", Host: "shop.example.com:443", URL: &url.URL{Host: "shop.example.com:443"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lookup(t, table, tc.r); got != nil {
				t.Errorf("got route %q, want none", got.Route.Name)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	ok := route.Route{Name: "api", PathPrefix: "/api", Upstreams: []string{"http://10.0.0.1:8080"}}
	with := func(change func(*route.Route)) []route.Route {
		r := ok
		change(&r)
		return []route.Route{r}
	}
	for _, tc := range []struct {
		name   string
		routes []route.Route
		want   []string // each in the error
	}{
		{"no name", with(func(r *route.Route) { r.Name = "" }), []string{"routes[0]", "Name is required"}},
		{"duplicate name", []route.Route{ok, {Name: "api", PathPrefix: "/other", Upstreams: ok.Upstreams}}, []string{`route "api"`, "Name is used"}},
		{"no prefix", with(func(r *route.Route) { r.PathPrefix = "" }), []string{`route "api"`, "PathPrefix", `start with "/"`}},
		{"relative prefix", with(func(r *route.Route) { r.PathPrefix = "api" }), []string{"PathPrefix", `start with "/"`}},
		{"unclean prefix", with(func(r *route.Route) { r.PathPrefix = "/api/../admin" }), []string{"PathPrefix", "not canonical"}},
		{"query in prefix", with(func(r *route.Route) { r.PathPrefix = "/api?x" }), []string{"PathPrefix", "query"}},
		{"same place", []route.Route{ok, {Name: "b", Host: "", PathPrefix: "/api", Upstreams: ok.Upstreams}}, []string{`route "b"`, `those of route "api"`}},
		{"bad wildcard", with(func(r *route.Route) { r.Host = "a.*.example.com" }), []string{"Host", "wildcard"}},
		{"port in host", with(func(r *route.Route) { r.Host = "example.com:443" }), []string{"Host", "no port"}},
		{"no upstreams", with(func(r *route.Route) { r.Upstreams = nil }), []string{"Upstreams", "at least one"}},
		{"bad scheme", with(func(r *route.Route) { r.Upstreams = []string{"http://a:1", "ftp://b:2"} }), []string{"Upstreams[1]", `scheme "ftp"`}},
		{"no host", with(func(r *route.Route) { r.Upstreams = []string{"http:///x"} }), []string{"Upstreams[0]", "no host"}},
		{"query", with(func(r *route.Route) { r.Upstreams = []string{"http://a:1/x?y=1"} }), []string{"Upstreams[0]", "query"}},
		{"user info", with(func(r *route.Route) { r.Upstreams = []string{"https://u:p@a:1"} }), []string{"Upstreams[0]", "user info"}},
		{"negative timeout", with(func(r *route.Route) { r.Timeout = -time.Second }), []string{"Timeout", "negative"}},
		{"negative retries", with(func(r *route.Route) { r.Retries = -1 }), []string{"Retries", "negative"}},
		{"negative eject duration", with(func(r *route.Route) { r.Eject.Duration = -1 }), []string{"Eject.Duration"}},
		{"health path", with(func(r *route.Route) { r.Health = &route.HealthCheck{Path: "healthz"} }), []string{"Health.Path"}},
		{"health interval", with(func(r *route.Route) { r.Health = &route.HealthCheck{Path: "/", Interval: -1} }), []string{"Health.Interval"}},
		{"health thresholds", with(func(r *route.Route) { r.Health = &route.HealthCheck{Path: "/", Healthy: -1, Unhealthy: -2} }), []string{"Health.Healthy", "Health.Unhealthy"}},
		{"every problem", with(func(r *route.Route) { r.PathPrefix, r.Retries = "", -1 }), []string{"PathPrefix", "Retries"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := route.New(tc.routes, route.Options{Logger: discard()})
			if err == nil {
				table.Close()
				t.Fatal("got no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "route: ") {
				t.Errorf("got %q, want the package's prefix", err)
			}
		})
	}
	t.Run("request ID header", func(t *testing.T) {
		if _, err := route.New([]route.Route{ok}, route.Options{RequestIDHeader: "X Id"}); err == nil || !strings.Contains(err.Error(), "RequestIDHeader") {
			t.Errorf("got %v, want an error naming RequestIDHeader", err)
		}
	})
}

// TestNewFieldErrors checks that each problem New finds names its route
// and field, so that a config file can point at its line.
func TestNewFieldErrors(t *testing.T) {
	ups := []string{"http://10.0.0.1:8080"}
	routes := []route.Route{
		{Name: "a", PathPrefix: "/a", Upstreams: ups},
		{Name: "b", PathPrefix: "b", Upstreams: []string{"http://a:1", "ftp://b:2"}, Health: &route.HealthCheck{Path: "/", Unhealthy: -1}},
		{Name: "a", PathPrefix: "/c", Upstreams: ups, Retries: -1},
	}
	_, err := route.New(routes, route.Options{Logger: discard()})
	var got []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *route.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("got %v, want a *route.FieldError", e)
		}
		got = append(got, fmt.Sprintf("%d.%s", fe.Route, fe.Field))
	}
	want := []string{"1.PathPrefix", "1.Upstreams[1]", "1.Health.Unhealthy", "2.Name", "2.Retries"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
