package route_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/route"
)

func TestPaths(t *testing.T) {
	up := newEcho(t, "up")
	table := newTable(t, []route.Route{
		{Name: "strip", PathPrefix: "/api", StripPrefix: true, Upstreams: []string{up.URL + "/base"}},
		{Name: "strip-slash", PathPrefix: "/s/", StripPrefix: true, Upstreams: []string{up.URL + "/"}},
		{Name: "keep", PathPrefix: "/keep", Upstreams: []string{up.URL}},
		{Name: "keep-base", PathPrefix: "/kb", Upstreams: []string{up.URL + "/v2/"}},
	}, route.Options{})
	base, client := gateway(t, table, false)
	for _, tc := range []struct {
		path      string
		wantPath  string
		wantQuery string
	}{
		{"/api/users?id=7&x", "/base/users", "id=7&x"},
		{"/api", "/base/", ""},
		{"/api/", "/base/", ""},
		{"/api/a%2Fb/c", "/base/a%2Fb/c", ""}, // the escaped form is kept
		{"/s/a", "/a", ""},
		{"/s/", "/", ""},
		{"/keep/a", "/keep/a", ""},
		{"/keep", "/keep", ""},
		{"/kb/x/", "/v2/kb/x/", ""},
		{"/keep/../api/x", "/base/x", ""}, // cleaned, then routed
		{"/api//x/./y", "/base/x/y", ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			status, _, body := get(t, client, base+tc.path)
			if status != http.StatusOK {
				t.Fatalf("got status %d (%s), want 200", status, body)
			}
			s := decodeSeen(t, body)
			if s.Path != tc.wantPath || s.Query != tc.wantQuery {
				t.Errorf("upstream got %q?%q, want %q?%q", s.Path, s.Query, tc.wantPath, tc.wantQuery)
			}
		})
	}
}

func TestRoundRobin(t *testing.T) {
	a, b, c := newEcho(t, "a"), newEcho(t, "b"), newEcho(t, "c")
	table := newTable(t, []route.Route{
		{Name: "rr", PathPrefix: "/", Upstreams: []string{a.URL, b.URL, c.URL}},
	}, route.Options{})
	base, client := gateway(t, table, false)
	var got []string
	for range 7 {
		_, _, body := get(t, client, base+"/")
		got = append(got, decodeSeen(t, body).Upstream)
	}
	if want := "a b c a b c a"; strings.Join(got, " ") != want {
		t.Errorf("got upstreams %q, want %q", strings.Join(got, " "), want)
	}
}

func TestHeaders(t *testing.T) {
	up := newEcho(t, "up")
	hop := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Up-Kept", "1")
	}))
	table := newTable(t, []route.Route{
		{Name: "echo", PathPrefix: "/", Upstreams: []string{up.URL}},
		{Name: "hop", PathPrefix: "/hop", Upstreams: []string{hop}},
	}, route.Options{})
	base, client := gateway(t, table, false)

	t.Run("request", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, base+"/x", nil)
		req.Host = "api.example.com"
		for k, v := range map[string]string{
			"Connection":          "keep-alive, X-Hop",
			"X-Hop":               "1",
			"Keep-Alive":          "timeout=5",
			"Proxy-Authorization": "Basic Zm9vOmJhcg==",
			"X-Forwarded-For":     "6.6.6.6",
			"X-Forwarded-Host":    "evil.example",
			"X-Forwarded-Proto":   "https",
			"X-Forwarded-Port":    "1",
			"X-Forwarded-Prefix":  "/evil",
			"Forwarded":           "for=6.6.6.6;host=evil.example;proto=https",
			"X-Real-Ip":           "6.6.6.6",
			"X-Kept":              "yes",
		} {
			req.Header.Set(k, v)
		}
		_, _, body := do(t, client, req)
		s := decodeSeen(t, body)
		for _, gone := range []string{"X-Hop", "Keep-Alive", "Proxy-Authorization", "X-Forwarded-Port", "X-Forwarded-Prefix", "X-Real-Ip"} {
			if v, ok := s.Header[gone]; ok {
				t.Errorf("upstream got %s: %q, want it removed", gone, v)
			}
		}
		for k, want := range map[string]string{
			"X-Forwarded-For":   "127.0.0.1",
			"X-Forwarded-Host":  "api.example.com",
			"X-Forwarded-Proto": "http",
			"Forwarded":         "for=127.0.0.1;host=api.example.com;proto=http",
			"X-Kept":            "yes",
		} {
			if got := s.Header.Values(k); len(got) != 1 || got[0] != want {
				t.Errorf("upstream got %s: %q, want %q", k, got, want)
			}
		}
		if want := strings.TrimPrefix(up.URL, "http://"); s.Host != want {
			t.Errorf("upstream got Host %q, want its own, %q", s.Host, want)
		}
	})
	t.Run("quoted Forwarded host", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, base+"/x", nil)
		req.Host = "api.example.com:8443"
		_, _, body := do(t, client, req)
		if got, want := decodeSeen(t, body).Header.Get("Forwarded"), `for=127.0.0.1;host="api.example.com:8443";proto=http`; got != want {
			t.Errorf("upstream got Forwarded %q, want %q", got, want)
		}
	})
	t.Run("response", func(t *testing.T) {
		_, h, _ := get(t, client, base+"/hop")
		for _, gone := range []string{"X-Up-Hop", "Keep-Alive"} {
			if v, ok := h[gone]; ok {
				t.Errorf("client got %s: %q, want it removed", gone, v)
			}
		}
		if h.Get("X-Up-Kept") != "1" {
			t.Errorf("client got X-Up-Kept %q, want 1", h.Get("X-Up-Kept"))
		}
	})
}

// httptestServer serves h on a loopback listener until the test ends and
// returns its URL.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	return "http://" + serve(t, h)
}

func TestRequestID(t *testing.T) {
	up := newEcho(t, "up")
	table := newTable(t, []route.Route{
		{Name: "echo", PathPrefix: "/", Upstreams: []string{up.URL}},
		{Name: "down", PathPrefix: "/down", Upstreams: []string{"http://" + closedAddr(t)}},
	}, route.Options{})
	base, client := gateway(t, table, false)
	generated := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, tc := range []struct {
		name string
		sent string // "" sends none
		keep bool
	}{
		{"kept", "req-42 from the client", true},
		{"longest kept", strings.Repeat("a", 128), true},
		{"none", "", false},
		{"too long", strings.Repeat("a", 129), false},
		{"not ASCII", "café", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/x", "/down"} {
				req, _ := http.NewRequest(http.MethodGet, base+path, nil)
				if tc.sent != "" {
					req.Header.Set("X-Request-Id", tc.sent)
				}
				status, h, body := do(t, client, req)
				got := h.Get("X-Request-Id")
				switch {
				case tc.keep && got != tc.sent:
					t.Errorf("%s: response has X-Request-Id %q, want %q", path, got, tc.sent)
				case !tc.keep && !generated.MatchString(got):
					t.Errorf("%s: response has X-Request-Id %q, want 32 hex digits", path, got)
				}
				if status == http.StatusOK {
					if up := decodeSeen(t, body).Header.Values("X-Request-Id"); len(up) != 1 || up[0] != got {
						t.Errorf("upstream got X-Request-Id %q, want %q", up, got)
					}
				}
			}
		})
	}
	t.Run("own header", func(t *testing.T) {
		table := newTable(t, []route.Route{{Name: "echo", PathPrefix: "/", Upstreams: []string{up.URL}}},
			route.Options{RequestIDHeader: "x-trace"})
		base, client := gateway(t, table, false)
		req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
		req.Header.Set("X-Trace", "t-1")
		_, h, body := do(t, client, req)
		if h.Get("X-Trace") != "t-1" || decodeSeen(t, body).Header.Get("X-Trace") != "t-1" {
			t.Errorf("got X-Trace %q on the response, %q upstream, want t-1 on both", h.Get("X-Trace"), decodeSeen(t, body).Header.Get("X-Trace"))
		}
		if v, ok := h["X-Request-Id"]; ok {
			t.Errorf("got X-Request-Id %q, want none", v)
		}
	})
}

func TestErrors(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			w.Write([]byte("the start"))
			http.NewResponseController(w).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	table := newTable(t, []route.Route{
		{Name: "slow", PathPrefix: "/", Timeout: 50 * time.Millisecond, Upstreams: []string{hang}},
		{Name: "down", PathPrefix: "/down", Upstreams: []string{"http://" + closedAddr(t)}},
	}, route.Options{})
	base, client := gateway(t, table, false)

	for _, tc := range []struct {
		path   string
		status int
		error  string
	}{
		{"/wait", http.StatusGatewayTimeout, "gateway_timeout"},
		{"/down", http.StatusBadGateway, "bad_gateway"},
	} {
		t.Run(tc.error, func(t *testing.T) {
			status, h, body := get(t, client, base+tc.path)
			if status != tc.status {
				t.Errorf("got status %d, want %d", status, tc.status)
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", ct)
			}
			e := decodeError(t, body)
			if e.Error != tc.error || !strings.Contains(e.Message, "route ") {
				t.Errorf("got %+v, want error %q and a message naming the route", e, tc.error)
			}
			if strings.Contains(body, "127.0.0.1") {
				t.Errorf("got %q, which tells where the upstream is", body)
			}
		})
	}
	t.Run("timeout during the body", func(t *testing.T) {
		resp, err := client.Get(base + "/body")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Errorf("got the whole body %q, want it cut at the route's Timeout", b)
		}
	})
}
