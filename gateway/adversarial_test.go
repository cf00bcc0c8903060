package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// The adversarial suite: a hostile client against a real gateway (real
// listeners, a real upstream), one row per attack. Each row sends its
// request as raw bytes on a connection of its own, after the requests
// that set the scene, and asserts the answer's status, what the upstream
// saw of it (or that it saw nothing), and which limits it charged.

const hostileRules = `domain: api
client_ip:
  keys: [client_ip]
rules:
  - name: per_path
    match: [{key: path}]
    algorithm: fixed_window
    limits: [{name: minute, rate: 3, period: 1m}]
  - name: per_ip
    match: [{key: client_ip}]
    algorithm: fixed_window
    limits: [{name: minute, rate: 1000, period: 1m}]
  - name: per_user
    match: [{key: user_id}]
    algorithm: fixed_window
    limits: [{name: minute, rate: 1000, period: 1m}]
  - name: per_key
    match: [{key: api_key}]
    algorithm: fixed_window
    limits: [{name: minute, rate: 1000, period: 1m}]
  - name: per_tenant
    match: [{key: x-tenant}]
    algorithm: fixed_window
    limits: [{name: minute, rate: 3, period: 1m}]
`

const hostileGateway = `rules: rules.yaml
listeners: [{addr: "127.0.0.1:0"}]
max_body_bytes: 1000
TRUSTED
auth:
  users:
    jwt:
      keys: [{file: hs256.key, algorithms: [HS256]}]
      issuer: https://issuer.test
      audience: [api]
  tokens:
    jwt:
      keys: [{file: hs256.key, algorithms: [HS256]}]
      issuer: https://issuer.test
      audience: [api]
      header: X-Token
  partners:
    api_keys:
      query: api_key
      keys: [{id: acme, hash: "HASH"}]
routes:
  - name: paths
    path_prefix: /p/
    upstreams: [UPSTREAM]
    limits: {domain: api, descriptors: [[path], [client_ip]]}
  - name: tenants
    path_prefix: /t/
    upstreams: [UPSTREAM]
    limits: {domain: api, descriptors: [["header:X-Tenant"]]}
  - name: users
    path_prefix: /users/
    upstreams: [UPSTREAM]
    auth: users
    limits: {domain: api, descriptors: [[user_id]]}
  - name: tokens
    path_prefix: /tok/
    upstreams: [UPSTREAM]
    auth: tokens
    limits: {domain: api, descriptors: [[user_id]]}
  - name: partners
    path_prefix: /keys/
    upstreams: [UPSTREAM]
    auth: partners
    limits: {domain: api, descriptors: [[api_key]]}
`

// upstreamSaw is what the upstream saw of one request.
type upstreamSaw struct {
	URI     string // the request target as received
	Header  http.Header
	Body    string
	BodyErr error
}

// charge is one key a check asked for, and whether it was charged.
type charge struct {
	key     string
	allowed bool
}

// chargeLog is a limiter that records the keys of every check.
type chargeLog struct {
	bouncer.Limiter
	mu      sync.Mutex
	charges []charge
}

func (c *chargeLog) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	d, err := c.Limiter.Check(ctx, r)
	if r.Peek {
		return d, err // charges nothing
	}
	c.mu.Lock()
	for _, k := range r.Keys {
		c.charges = append(c.charges, charge{k.Key, err == nil && d.Allowed})
	}
	c.mu.Unlock()
	return d, err
}

// take returns the keys charged since the last call.
func (c *chargeLog) take() (charged, denied []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.charges {
		if ch.allowed {
			charged = append(charged, ch.key)
		} else {
			denied = append(denied, ch.key)
		}
	}
	c.charges = nil
	return charged, denied
}

// hostileEnv is a gateway in front of a recording upstream.
type hostileEnv struct {
	gw       *gateway.Gateway
	addr     string // the gateway's listener
	upstream chan upstreamSaw
	charges  *chargeLog
	alarms   *alarmLog
}

// alarmLog is a slog handler that keeps the messages of records at Warn
// and above: what would page an operator.
type alarmLog struct {
	mu   sync.Mutex
	msgs []string
}

func (a *alarmLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (a *alarmLog) Handle(_ context.Context, r slog.Record) error {
	a.mu.Lock()
	a.msgs = append(a.msgs, r.Level.String()+" "+r.Message)
	a.mu.Unlock()
	return nil
}
func (a *alarmLog) WithAttrs([]slog.Attr) slog.Handler { return a }
func (a *alarmLog) WithGroup(string) slog.Handler      { return a }

func (a *alarmLog) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.msgs
	a.msgs = nil
	return m
}

// newHostileEnv starts an upstream and a gateway in front of it, trusting
// trusted (a YAML list, "" for none) as proxies; readTimeout, if not
// zero, bounds how long the gateway's server reads a request.
func newHostileEnv(t *testing.T, trusted string, readTimeout time.Duration) *hostileEnv {
	t.Helper()
	e := &hostileEnv{upstream: make(chan upstreamSaw, 64), alarms: &alarmLog{}}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		e.upstream <- upstreamSaw{r.RequestURI, r.Header.Clone(), string(b), err}
		io.WriteString(w, "upstream ok")
	}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if trusted != "" {
		trusted = "trusted_proxies: " + trusted
	}
	write("hs256.key", secret)
	write("rules.yaml", hostileRules)
	write("gateway.yaml", strings.NewReplacer("UPSTREAM", up.URL, "HASH", auth.HashKey("acme-secret-key"), "TRUSTED", trusted).Replace(hostileGateway))
	cfg, err := gateway.Load(filepath.Join(dir, "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rules.Load(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	// A clock that stands still: a window never turns within a row.
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC))
	store := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { store.Close() })
	e.charges = &chargeLog{Limiter: store}
	e.gw, err = gateway.New(cfg, gateway.Options{Engine: rules.NewEngine(rc, e.charges), Logger: slog.New(e.alarms)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.gw.Close)
	srv := httptest.NewUnstartedServer(e.gw)
	srv.Config.ReadTimeout = readTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	e.addr = srv.Listener.Addr().String()
	return e
}

// rawAnswer is the gateway's answer to a raw request: its status (0 if
// the connection closed without one), headers and body.
type rawAnswer struct {
	status int
	header http.Header
	body   string
}

// send writes raw on a new connection to the gateway and reads one
// answer.
func (e *hostileEnv) send(t *testing.T, raw string) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return rawAnswer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawAnswer{resp.StatusCode, resp.Header, string(b)}
}

// saw returns what the upstream saw since the last call.
func (e *hostileEnv) saw() []upstreamSaw {
	var out []upstreamSaw
	for {
		select {
		case s := <-e.upstream:
			out = append(out, s)
		default:
			return out
		}
	}
}

// get is a raw GET of target with the extra header lines hdr.
func get(target string, hdr ...string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: api.test\r\n" + strings.Join(append(hdr, ""), "\r\n") + "Connection: close\r\n\r\n"
}

// post is a raw POST of target with a chunked body, written as given.
func post(target, chunked string, hdr ...string) string {
	return "POST " + target + " HTTP/1.1\r\nHost: api.test\r\n" + strings.Join(append(hdr, ""), "\r\n") +
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked
}

// headerNamed returns h's values of every header whose name is name to a
// server that ignores case and reads '_' as '-'.
func headerNamed(h http.Header, name string) []string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	var vs []string
	for k, v := range h {
		if norm(k) == norm(name) {
			vs = append(vs, v...)
		}
	}
	return vs
}

type attack struct {
	name    string
	trusted string   // the gateway's trusted proxies (YAML), "" for none
	before  []string // raw requests that set the scene, each answered before the attack
	send    string   // the attack, raw
	status  int      // the answer's; the error code too when error is set
	error   string   // the JSON error code, "" for an upstream's answer
	// upstream checks what the upstream saw of the attack; nil means it
	// must see nothing. With mayReach, it may see nothing or once.
	upstream func(t *testing.T, s upstreamSaw)
	mayReach bool
	charged  []string // the store keys the attack charged, in any order
}

// sees returns an upstream check that wants header name to have exactly
// the values want in every spelling, and the target uri ("" for any).
func sees(uri string, name string, want ...string) func(*testing.T, upstreamSaw) {
	return func(t *testing.T, s upstreamSaw) {
		t.Helper()
		if uri != "" && s.URI != uri {
			t.Errorf("upstream got target %q, want %q", s.URI, uri)
		}
		if name == "" {
			return
		}
		if got := headerNamed(s.Header, name); !slices.Equal(got, want) {
			t.Errorf("upstream got %s (every spelling) %q, want %q", name, got, want)
		}
	}
}

func TestAdversarial(t *testing.T) {
	aliceToken := token(t, nil)
	alice := "Authorization: Bearer " + aliceToken
	exhaustPath := []string{get("/p/expensive"), get("/p/expensive"), get("/p/expensive")}
	ipKey := "api:client_ip:127.0.0.1/32"
	longHeader := strings.Repeat("t", rules.MaxValueLen+1)
	var malformed []string // more than the 5 failures that eject an upstream, each on a path of its own
	for i := range 6 {
		malformed = append(malformed, post(fmt.Sprintf("/p/body%d", i), "5\r\nhello\r\nzz\r\n"))
	}
	attacks := []attack{
		// What did not hold: a limit keyed by path dodged by spellings.
		{name: "path/doubled slash", before: exhaustPath, send: get("/p//expensive"), status: 429, error: "rate_limited"},
		{name: "path/dot segment", before: exhaustPath, send: get("/p/./expensive"), status: 429, error: "rate_limited"},
		{name: "path/detour", before: exhaustPath, send: get("/p/x/../expensive"), status: 429, error: "rate_limited"},
		{name: "path/encoded letter", before: exhaustPath, send: get("/p/%65xpensive"), status: 429, error: "rate_limited"},
		{name: "path/canonical reaches upstream", send: get("/p//x/./y/../expensive"), status: 200,
			upstream: sees("/p/x/expensive", ""), charged: []string{"api:path:/p/x/expensive", ipKey}},
		{name: "path/encoded slash kept", send: get("/p/a%2fb"), status: 200,
			upstream: sees("/p/a%2Fb", ""), charged: []string{"api:path:/p/a%252Fb", ipKey}},
		{name: "path/NUL", send: get("/p/expensive%00.json"), status: 400, error: "bad_path"},
		{name: "path/dot with parameters", send: get("/p/..;/users/me"), status: 400, error: "bad_path"},
		{name: "path/encoded backslash", send: get("/p/..%5Cusers"), status: 400, error: "bad_path"},
		{name: "path/backslash", send: get("/p\\expensive"), status: 400, error: "bad_path"},
		{name: "path/double encoding", send: get("/p/%2565xpensive"), status: 400, error: "bad_path"},
		{name: "path/encoded slash beside dots", send: get("/p/..%2Fusers/me"), status: 400, error: "bad_path"},
		{name: "path/too long for a key", send: get("/p/" + strings.Repeat("a", rules.MaxValueLen)), status: 414, error: "uri_too_long"},

		// What did not hold: the identity sent upstream removed or forged.
		{name: "identity/removed via Connection", send: get("/users/me", alice, "Connection: X-Bouncer-Subject, X-Bouncer-Auth-Method"), status: 200,
			upstream: sees("/users/me", "X-Bouncer-Subject", "alice"), charged: []string{"api:user_id:alice"}},
		{name: "identity/forged with underscores", send: get("/p/a", "X_Bouncer_Subject: admin", "x-bouncer_plan: gold"), status: 200,
			upstream: func(t *testing.T, s upstreamSaw) {
				for k := range s.Header {
					if strings.HasPrefix(strings.ReplaceAll(strings.ToLower(k), "_", "-"), "x-bouncer-") {
						t.Errorf("upstream got %s: %q from an anonymous client", k, s.Header[k])
					}
				}
			}, charged: []string{"api:path:/p/a", ipKey}},
		{name: "identity/forged beside a real one", send: get("/users/me", alice, "X_Bouncer_Subject: admin"), status: 200,
			upstream: sees("/users/me", "X-Bouncer-Subject", "alice"), charged: []string{"api:user_id:alice"}},
		{name: "identity/forwarded-for with underscores", send: get("/p/a", "X_Forwarded_For: 203.0.113.9"), status: 200,
			upstream: sees("", "X-Forwarded-For", "127.0.0.1"), charged: []string{"api:path:/p/a", ipKey}},

		// What did not hold: the client-IP headers and the API key.
		{name: "client ip/True-Client-IP", send: get("/p/a", "True-Client-IP: 203.0.113.9", "CF-Connecting-IP: 203.0.113.9", "X-Client-IP: 203.0.113.9", "X-Real-IP: 203.0.113.9"), status: 200,
			upstream: func(t *testing.T, s upstreamSaw) {
				for _, h := range []string{"True-Client-Ip", "Cf-Connecting-Ip", "X-Client-Ip", "X-Real-Ip"} {
					if v := headerNamed(s.Header, h); v != nil {
						t.Errorf("upstream got %s %q from an untrusted client", h, v)
					}
				}
			}, charged: []string{"api:path:/p/a", ipKey}},
		{name: "client ip/behind a trusted proxy", trusted: "[127.0.0.0/8]", send: get("/p/a", "X-Forwarded-For: 203.0.113.7"), status: 200,
			upstream: func(t *testing.T, s upstreamSaw) {
				sees("", "X-Forwarded-For", "203.0.113.7")(t, s)
				sees("", "Forwarded", "for=203.0.113.7;host=api.test;proto=http")(t, s)
			}, charged: []string{"api:path:/p/a", "api:client_ip:203.0.113.7/32"}},
		{name: "api key/header not forwarded", send: get("/keys/a", "X-API-Key: acme-secret-key"), status: 200,
			upstream: sees("/keys/a", "X-Api-Key"), charged: []string{"api:api_key:acme"}},
		{name: "api key/query not forwarded", send: get("/keys/a?api_key=acme-secret-key&x=1"), status: 200,
			upstream: sees("/keys/a?x=1", "X-Api-Key"), charged: []string{"api:api_key:acme"}},
		{name: "api key/query with a ';' separator", send: get("/keys/a?x=1;api_key=other-key", "X-API-Key: acme-secret-key"), status: 200,
			upstream: sees("/keys/a", "X-Api-Key"), charged: []string{"api:api_key:acme"}},
		{name: "jwt/underscore copy of the token header", send: get("/tok/a", "X-Token: "+aliceToken, "X_Token: forged"), status: 200,
			upstream: sees("/tok/a", "X-Token", aliceToken), charged: []string{"api:user_id:alice"}},
		{name: "api key/header beside an underscore copy", send: get("/keys/a", "X-API-Key: acme-secret-key", "X_API_Key: acme-secret-key"), status: 200,
			upstream: sees("/keys/a", "X-Api-Key"), charged: []string{"api:api_key:acme"}},

		// What did not hold: a limited header's spellings and lengths.
		{name: "header/over the key bound", send: get("/t/a", "X-Tenant: "+longHeader), status: 431, error: "header_too_large"},
		{name: "header/sent twice", send: get("/t/a", "X-Tenant: fresh", "X-Tenant: victim"), status: 400, error: "bad_header"},
		{name: "header/underscore copy dropped", send: get("/t/a", "X-Tenant: acme", "X_Tenant: victim"), status: 200,
			upstream: sees("/t/a", "X-Tenant", "acme"), charged: []string{"api:x-tenant:acme"}},

		// What did not hold: a failure of the client charged to the upstream.
		{name: "body/malformed chunks are the client's", before: malformed,
			send: get("/p/after"), status: 200, upstream: sees("/p/after", ""), charged: []string{"api:path:/p/after", ipKey}},
		{name: "body/malformed chunks answered 400", send: post("/p/body", "5\r\nhello\r\nzz\r\n"), status: 400, error: "bad_request",
			upstream: func(t *testing.T, s upstreamSaw) {
				if s.BodyErr == nil {
					t.Errorf("upstream read the body %q whole, want it cut", s.Body)
				}
			}, mayReach: true, charged: []string{"api:path:/p/body", ipKey}},

		// What held, and must stay held.
		{name: "held/unauthenticated charged to no one", send: get("/users/me"), status: 401, error: "unauthenticated"},
		{name: "held/alg none", send: get("/users/me", "Authorization: Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhZG1pbiIsImF1ZCI6ImFwaSIsImlzcyI6Imh0dHBzOi8vaXNzdWVyLnRlc3QiLCJleHAiOjQxMDI0NDQ4MDB9."),
			status: 401, error: "unauthenticated"},
		{name: "held/spoofed forwarded-for from an untrusted peer", send: get("/p/a", "X-Forwarded-For: 203.0.113.9", "Forwarded: for=203.0.113.9"), status: 200,
			upstream: func(t *testing.T, s upstreamSaw) {
				sees("", "X-Forwarded-For", "127.0.0.1")(t, s)
				sees("", "Forwarded", "for=127.0.0.1;host=api.test;proto=http")(t, s)
			}, charged: []string{"api:path:/p/a", ipKey}},
		{name: "held/traversal into another route", send: get("/p/../users/me"), status: 401, error: "unauthenticated"},
		// Transfer-Encoding wins over Content-Length: the body is empty,
		// and what follows is the next request, answered on its own.
		{name: "held/smuggling CL and TE", send: "POST /p/a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /users/me HTTP/1.1\r\nHost: api.test\r\n\r\n", status: 200,
			upstream: func(t *testing.T, s upstreamSaw) {
				if s.URI != "/p/a" || s.Body != "" {
					t.Errorf("upstream got %s with body %q, want /p/a with none (the smuggled request not inside)", s.URI, s.Body)
				}
			}, charged: []string{"api:path:/p/a", ipKey}},
		{name: "held/hop-by-hop header named in Connection", send: get("/p/a", "Connection: X-Hop", "X-Hop: 1"), status: 200,
			upstream: sees("", "X-Hop"), charged: []string{"api:path:/p/a", ipKey}},
		{name: "held/oversized body", send: "PUT /p/a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n" + strings.Repeat("b", 5000), status: 413, error: "body_too_large"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			e := newHostileEnv(t, a.trusted, 0)
			for i, raw := range a.before {
				if ans := e.send(t, raw); ans.status == 0 {
					t.Fatalf("scene request %d: no answer", i)
				}
			}
			e.charges.take()
			// The attack carries a mark the scene's requests lack, by
			// which the upstream's view of it is told from theirs (a
			// scene request whose body failed may reach the upstream
			// after its answer).
			line, rest, _ := strings.Cut(a.send, "\r\n")
			ans := e.send(t, line+"\r\nX-Attack: 1\r\n"+rest)
			if ans.status != a.status {
				t.Fatalf("status %d (%s), want %d", ans.status, ans.body, a.status)
			}
			if a.error != "" {
				var body struct{ Error string }
				if err := json.Unmarshal([]byte(ans.body), &body); err != nil || body.Error != a.error {
					t.Errorf("body %q, want a JSON error %q", ans.body, a.error)
				}
			}
			var seen []upstreamSaw
			for _, s := range e.saw() {
				if s.Header.Get("X-Attack") != "" {
					seen = append(seen, s)
				}
			}
			switch {
			case a.upstream == nil && len(seen) > 0:
				t.Errorf("the upstream saw %d requests (%s), want none", len(seen), seen[0].URI)
			case a.upstream != nil && len(seen) != 1 && !(a.mayReach && len(seen) == 0):
				t.Errorf("the upstream saw %d requests, want 1", len(seen))
			case a.upstream != nil && len(seen) == 1:
				a.upstream(t, seen[0])
			}
			charged, _ := e.charges.take()
			slices.Sort(charged)
			want := slices.Sorted(slices.Values(a.charged))
			if !slices.Equal(charged, want) {
				t.Errorf("charged %q, want %q", charged, want)
			}
			for _, h := range e.gw.Health() {
				if !h.EjectedUntil.IsZero() {
					t.Errorf("upstream %s of route %s ejected", h.Upstream, h.Route)
				}
			}
			// A client's attack is no alarm of ours: nothing at Warn or
			// above (debug lines only).
			if m := e.alarms.take(); len(m) > 0 {
				t.Errorf("the gateway logged %q, want nothing at Warn or above", m)
			}
		})
	}
}

// A client that stalls its body is answered 408 when the server's read
// deadline cuts it (never an empty 200), the upstream is not blamed, and
// the next request goes through.
func TestStalledBody(t *testing.T) {
	e := newHostileEnv(t, "", 200*time.Millisecond)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Headers and half the announced body, then nothing: the read
	// deadline ends it.
	if _, err := io.WriteString(c, "POST /p/slow HTTP/1.1\r\nHost: api.test\r\nContent-Length: 100\r\n\r\n"+strings.Repeat("s", 50)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v; want 408", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"request_timeout"`) {
		t.Fatalf("a stalled body: %d %s, want 408 request_timeout", resp.StatusCode, b)
	}
	for i := range 6 {
		if ans := e.send(t, "POST /p/slow HTTP/1.1\r\nHost: api.test\r\nContent-Length: 100\r\n\r\n"); ans.status == 200 {
			t.Fatalf("stalled body %d: 200, want an error", i)
		}
	}
	if ans := e.send(t, get("/p/after")); ans.status != 200 {
		t.Fatalf("a request after seven stalled bodies: %d %s, want 200 (the upstream not ejected)", ans.status, ans.body)
	}
	for _, h := range e.gw.Health() {
		if !h.EjectedUntil.IsZero() {
			t.Errorf("upstream %s of route %s ejected", h.Upstream, h.Route)
		}
	}
}
