package httplimit_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/internal/edgetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	newStore  = edgetest.NewStore
	perMinute = edgetest.PerMinute
)

type (
	failing  = edgetest.Failing
	degraded = edgetest.Degraded
)

// serve starts a real server of handler wrapped in the middleware of lim,
// rules and o.
func serve(t *testing.T, lim bouncer.Limiter, rules []httplimit.Rule, o httplimit.Options, handler http.Handler) *httptest.Server {
	t.Helper()
	mw, err := httplimit.Middleware(lim, rules, o)
	if err != nil {
		t.Fatalf("Middleware: %v", err)
	}
	if handler == nil {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	}
	srv := httptest.NewServer(mw(handler))
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, srv *httptest.Server, path string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func TestAllowedAndDeniedAnswers(t *testing.T) {
	s, clock := newStore(t)
	srv := serve(t, s, []httplimit.Rule{{Name: "per_ip", Key: httplimit.IP(nil), Limits: []bouncer.Limit{perMinute("m", 3)}}}, httplimit.Options{}, nil)
	for i := range 3 {
		a := get(t, srv, "/")
		if a.status != http.StatusOK || a.body != "ok" {
			t.Fatalf("request %d: %d %q, want 200 ok", i, a.status, a.body)
		}
		want := map[string]string{
			"RateLimit-Policy":      `"per_ip";q=3;w=60`,
			"RateLimit":             `"per_ip";r=` + strconv.Itoa(2-i) + ";t=60",
			"X-RateLimit-Limit":     "3",
			"X-RateLimit-Remaining": strconv.Itoa(2 - i),
			"X-RateLimit-Reset":     "60",
		}
		for k, v := range want {
			if got := a.header.Get(k); got != v {
				t.Errorf("request %d: %s = %q, want %q", i, k, got, v)
			}
		}
		if a.header.Get("Retry-After") != "" {
			t.Errorf("request %d: Retry-After on an allowed answer", i)
		}
	}
	clock.Advance(15 * time.Second)
	a := get(t, srv, "/")
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("4th request: status %d, want 429", a.status)
	}
	if got := a.header.Get("Retry-After"); got != "45" {
		t.Errorf("Retry-After = %q, want 45", got)
	}
	if got := a.header.Get("RateLimit"); got != `"per_ip";r=0;t=45` {
		t.Errorf("RateLimit = %q, want r=0, t=45", got)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var body struct {
		Error      string `json:"error"`
		Message    string `json:"message"`
		RetryAfter int    `json:"retry_after"`
	}
	if err := json.Unmarshal([]byte(a.body), &body); err != nil {
		t.Fatalf("body %q: %v", a.body, err)
	}
	if body.Error != "rate_limited" || body.RetryAfter != 45 || body.Message == "" {
		t.Errorf("body = %+v, want rate_limited, retry_after 45 and a message", body)
	}

	p := get(t, srv, "/", "Accept", "application/problem+json")
	if p.status != http.StatusTooManyRequests || !strings.HasPrefix(p.header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("with Accept: application/problem+json: %d %q, want 429 problem+json", p.status, p.header.Get("Content-Type"))
	}
	var prob map[string]any
	if err := json.Unmarshal([]byte(p.body), &prob); err != nil {
		t.Fatalf("problem body %q: %v", p.body, err)
	}
	if prob["status"] != float64(429) || !strings.HasSuffix(prob["type"].(string), "quota-exceeded") {
		t.Errorf("problem = %v, want status 429 and the quota-exceeded type", prob)
	}
}

func TestSpoofedForwardedForFromAnUntrustedPeerChangesNothing(t *testing.T) {
	s, _ := newStore(t)
	rules := []httplimit.Rule{{Name: "per_ip", Key: httplimit.IP(nil), Limits: []bouncer.Limit{perMinute("m", 2)}}}
	srv := serve(t, s, rules, httplimit.Options{}, nil)
	for i, spoof := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
		a := get(t, srv, "/", "X-Forwarded-For", spoof, "Forwarded", "for="+spoof)
		if want := map[bool]int{true: 200, false: 429}[i < 2]; a.status != want {
			t.Fatalf("request %d claiming %s: status %d, want %d (the peer is the client)", i, spoof, a.status, want)
		}
	}
	// Behind a trusted proxy (the loopback peer), the header names the
	// client: each address has its own count.
	trusted := &clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	rules[0].Key = httplimit.IP(trusted)
	s2, _ := newStore(t)
	srv = serve(t, s2, rules, httplimit.Options{}, nil)
	for _, client := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
		for i := range 3 {
			a := get(t, srv, "/", "X-Forwarded-For", "198.51.100.9, "+client)
			if want := map[bool]int{true: 200, false: 429}[i < 2]; a.status != want {
				t.Fatalf("client %s, request %d: status %d, want %d", client, i, a.status, want)
			}
		}
	}
}

func TestRulesAreAllOrNothing(t *testing.T) {
	s, _ := newStore(t)
	rules := []httplimit.Rule{
		{Name: "per_user", Key: httplimit.Header("X-User"), Limits: []bouncer.Limit{perMinute("m", 2)}},
		{Name: "global", Limits: []bouncer.Limit{perMinute("m", 3)}},
	}
	srv := serve(t, s, rules, httplimit.Options{}, nil)
	steps := []struct {
		user   string
		status int
	}{{"a", 200}, {"a", 200}, {"a", 429}, {"a", 429}, {"b", 200}, {"b", 429}, {"", 429}}
	for i, st := range steps {
		a := get(t, srv, "/", "X-User", st.user)
		if a.status != st.status {
			t.Fatalf("step %d (user %q): status %d, want %d", i, st.user, a.status, st.status)
		}
	}
	// a's denied requests charged nothing to global: b got the third unit.
}

func TestShadowRulesNeverRefuse(t *testing.T) {
	s, _ := newStore(t)
	var mu sync.Mutex
	var shadowDenied int
	o := httplimit.Options{Observe: func(r *http.Request, rule string, d bouncer.Decision, shadow bool) {
		mu.Lock()
		defer mu.Unlock()
		if shadow && rule == "trial" && !d.Allowed {
			shadowDenied++
		}
	}}
	rules := []httplimit.Rule{
		{Name: "trial", Shadow: true, Limits: []bouncer.Limit{perMinute("m", 1)}},
		{Name: "real", Limits: []bouncer.Limit{perMinute("m", 10)}},
	}
	srv := serve(t, s, rules, o, nil)
	for i := range 4 {
		a := get(t, srv, "/")
		if a.status != 200 {
			t.Fatalf("request %d: status %d, want 200 (the shadow rule must not refuse)", i, a.status)
		}
		if got := a.header.Get("RateLimit-Policy"); got != `"real";q=10;w=60` {
			t.Errorf("request %d: RateLimit-Policy %q, want the enforcing rule's alone", i, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if shadowDenied != 3 {
		t.Errorf("shadow denials observed: %d, want 3", shadowDenied)
	}
}

func TestExclusionsAndCost(t *testing.T) {
	s, _ := newStore(t)
	o := httplimit.Options{
		Exclude: httplimit.AnyOf(httplimit.ExcludePaths("/healthz", "/static/"), httplimit.ExcludeMethods(http.MethodOptions)),
		Cost: func(r *http.Request) int64 {
			if r.URL.Path == "/bulk" {
				return 3
			}
			if r.URL.Path == "/peek" {
				return 0
			}
			return 1
		},
	}
	srv := serve(t, s, []httplimit.Rule{{Name: "g", Limits: []bouncer.Limit{perMinute("m", 5)}}}, o, nil)
	for range 10 {
		if a := get(t, srv, "/healthz"); a.status != 200 || a.header.Get("RateLimit") != "" {
			t.Fatalf("/healthz: %d with RateLimit %q, want 200 and no headers", a.status, a.header.Get("RateLimit"))
		}
		get(t, srv, "/static/app.js")
	}
	if a := get(t, srv, "/peek"); a.header.Get("X-RateLimit-Remaining") != "5" {
		t.Fatalf("/peek: remaining %q, want 5: excluded paths and peeks charge nothing", a.header.Get("X-RateLimit-Remaining"))
	}
	if a := get(t, srv, "/bulk"); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("/bulk: %d remaining %q, want 200 and 2", a.status, a.header.Get("X-RateLimit-Remaining"))
	}
	if a := get(t, srv, "/bulk"); a.status != 429 {
		t.Fatalf("second /bulk: %d, want 429 (3 > 2 left)", a.status)
	}
	if a := get(t, srv, "/one"); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("/one: %d remaining %q, want 200 and 1", a.status, a.header.Get("X-RateLimit-Remaining"))
	}
}

func TestDeniedOnlyAndSkipHeaders(t *testing.T) {
	s, _ := newStore(t)
	srv := serve(t, s, []httplimit.Rule{{Name: "g", Limits: []bouncer.Limit{perMinute("m", 1)}}},
		httplimit.Options{DeniedOnly: true, SkipHeaders: header.XRateLimit}, nil)
	a := get(t, srv, "/")
	if a.header.Get("RateLimit") != "" || a.header.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("allowed answer has headers %v, want none (DeniedOnly)", a.header)
	}
	a = get(t, srv, "/")
	if a.status != 429 || a.header.Get("RateLimit") == "" || a.header.Get("X-RateLimit-Limit") != "" || a.header.Get("Retry-After") == "" {
		t.Fatalf("denied answer: %d %v, want 429 with RateLimit and Retry-After, without X-RateLimit-*", a.status, a.header)
	}
}

// notifying is a limiter that reports each refund.
type notifying struct {
	bouncer.Limiter
	refunds chan bouncer.Request
}

func (n *notifying) Refund(ctx context.Context, r bouncer.Request) error {
	err := n.Limiter.Refund(ctx, r)
	n.refunds <- r
	return err
}

func TestConcurrencyLeases(t *testing.T) {
	s, _ := newStore(t)
	lim := &notifying{s, make(chan bouncer.Request, 16)}
	release := make(chan struct{})
	entered := make(chan string, 16)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.URL.Path
		switch r.URL.Path {
		case "/hold":
			<-release
		case "/panic":
			panic(http.ErrAbortHandler)
		case "/hang":
			<-r.Context().Done()
			<-release
		}
		io.WriteString(w, "ok")
	})
	rules := []httplimit.Rule{{Name: "inflight", Limits: []bouncer.Limit{{Name: "c", Algorithm: bouncer.Concurrency, Rate: 1, Period: time.Minute}}}}
	srv := serve(t, lim, rules, httplimit.Options{}, handler)

	done := make(chan answer)
	go func() { done <- get(t, srv, "/hold") }()
	<-entered
	if a := get(t, srv, "/other"); a.status != 429 {
		t.Fatalf("second request while one is in flight: %d, want 429", a.status)
	}
	release <- struct{}{}
	if a := <-done; a.status != 200 {
		t.Fatalf("held request: %d, want 200", a.status)
	}
	<-lim.refunds // its lease
	if a := get(t, srv, "/after"); a.status != 200 {
		t.Fatalf("after the first finished: %d, want 200", a.status)
	}
	<-entered
	<-lim.refunds

	// A handler that panics gives its lease back. (On a new connection:
	// the client would send a GET again on a reused one that broke.)
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := fresh.Get(srv.URL + "/panic")
	if err == nil {
		resp.Body.Close()
	}
	<-entered
	<-lim.refunds
	if a := get(t, srv, "/after-panic"); a.status != 200 {
		t.Fatalf("after a panic: %d, want 200", a.status)
	}
	<-entered
	<-lim.refunds

	// A client that goes away frees its lease while the handler goes on.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hang", nil)
	gone := make(chan error)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	<-entered
	cancel()
	<-gone
	<-lim.refunds // freed on the cancellation, the handler still running
	if a := get(t, srv, "/while-hanging"); a.status != 200 {
		t.Fatalf("after the client went away: %d, want 200", a.status)
	}
	<-entered
	<-lim.refunds
	close(release)
	select {
	case r := <-lim.refunds:
		t.Fatalf("a second refund of the hung request's lease: %+v", r)
	default:
	}
}

func TestRefundOn5xx(t *testing.T) {
	s, _ := newStore(t)
	lim := &notifying{s, make(chan bouncer.Request, 16)}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "upstream down", http.StatusBadGateway)
			return
		}
		io.WriteString(w, "ok")
	})
	rules := []httplimit.Rule{
		{Name: "kind", RefundOn5xx: true, Limits: []bouncer.Limit{perMinute("m", 2)}},
		{Name: "strict", Limits: []bouncer.Limit{perMinute("m", 100)}},
	}
	srv := serve(t, lim, rules, httplimit.Options{}, handler)
	for i := range 5 {
		if a := get(t, srv, "/fail"); a.status != http.StatusBadGateway {
			t.Fatalf("failing request %d: %d, want 502 (its units given back)", i, a.status)
		}
		r := <-lim.refunds
		if len(r.Keys) != 1 || !strings.HasPrefix(r.Keys[0].Key, "kind") || r.Cost != 1 {
			t.Fatalf("refund %+v, want 1 unit to the rule kind alone", r)
		}
	}
	a := get(t, srv, "/ok")
	if a.status != 200 || a.header.Get("RateLimit") != `"kind";r=1;t=60` {
		t.Fatalf("after five failures: %d, RateLimit %q, want 200 and kind with 1 left", a.status, a.header.Get("RateLimit"))
	}
}

func TestStoreErrorsAndDegradedAnswers(t *testing.T) {
	s, _ := newStore(t)
	rules := []httplimit.Rule{{Name: "g", Limits: []bouncer.Limit{perMinute("m", 5)}}}
	srv := serve(t, failing{Limiter: s}, rules, httplimit.Options{Logger: discard()}, nil)
	a := get(t, srv, "/")
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"error":"limiter_unavailable"`) {
		t.Fatalf("store error: %d %q, want 503 with a JSON error", a.status, a.body)
	}
	srv = serve(t, failing{Limiter: s}, rules, httplimit.Options{OnError: func(w http.ResponseWriter, r *http.Request, err error) {
		w.Header().Set("X-Why", err.Error())
		w.WriteHeader(http.StatusTeapot)
	}}, nil)
	if a := get(t, srv, "/"); a.status != http.StatusTeapot || a.header.Get("X-Why") != "store down" {
		t.Fatalf("custom OnError: %d %q", a.status, a.header.Get("X-Why"))
	}
	srv = serve(t, degraded{Limiter: s}, rules, httplimit.Options{}, nil)
	if a := get(t, srv, "/"); a.status != 200 || a.header.Get("Bouncer-Degraded") != "true" {
		t.Fatalf("degraded decision: %d, Bouncer-Degraded %q, want 200 and true", a.status, a.header.Get("Bouncer-Degraded"))
	}
	srv = serve(t, s, rules, httplimit.Options{Cost: func(*http.Request) int64 { return -1 }}, nil)
	if a := get(t, srv, "/"); a.status != http.StatusBadRequest || !strings.Contains(a.body, `"error"`) {
		t.Fatalf("negative cost: %d %q, want 400 with a JSON error", a.status, a.body)
	}
}

func TestCustomDenial(t *testing.T) {
	s, _ := newStore(t)
	var got httplimit.Denial
	o := httplimit.Options{OnDenied: func(w http.ResponseWriter, r *http.Request, d httplimit.Denial) {
		got = d
		w.WriteHeader(http.StatusServiceUnavailable)
	}}
	rules := []httplimit.Rule{{Name: "two", Key: httplimit.Compose(httplimit.Method(), httplimit.Route()),
		Limits: []bouncer.Limit{perMinute("minute", 1), {Name: "day", Algorithm: bouncer.FixedWindow, Rate: 100, Period: 24 * time.Hour}}}}
	srv := serve(t, s, rules, o, nil)
	get(t, srv, "/a")
	if a := get(t, srv, "/b"); a.status != 200 {
		t.Fatalf("another route: %d, want 200 (counted apart)", a.status)
	}
	if a := get(t, srv, "/a"); a.status != http.StatusServiceUnavailable {
		t.Fatalf("custom denial: %d, want 503", a.status)
	}
	if got.Rule != "two" || got.Values.Policy != "two.minute" || got.Values.Window != time.Minute || got.Decision.Allowed {
		t.Fatalf("Denial = %+v, want rule two, policy two.minute, a minute's window", got)
	}
}

func TestInvalidRules(t *testing.T) {
	s, _ := newStore(t)
	cases := map[string][]httplimit.Rule{
		"no name":     {{Limits: []bouncer.Limit{perMinute("m", 1)}}},
		"no limits":   {{Name: "x"}},
		"same name":   {{Name: "x", Limits: []bouncer.Limit{perMinute("m", 1)}}, {Name: "x", Limits: []bouncer.Limit{perMinute("m", 1)}}},
		"bad limit":   {{Name: "x", Limits: []bouncer.Limit{{Name: "m", Algorithm: bouncer.FixedWindow}}}},
		"limit twice": {{Name: "x", Limits: []bouncer.Limit{perMinute("m", 1), perMinute("m", 2)}}},
	}
	for name, rules := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := httplimit.Middleware(s, rules, httplimit.Options{}); err == nil {
				t.Fatal("Middleware accepted invalid rules")
			}
		})
	}
}
