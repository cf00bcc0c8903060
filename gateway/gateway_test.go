package gateway_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "a test secret of thirty-two bytes!"

const rulesYAML = `domain: api
plans:
  key: plan
  default: free
client_ip:
  keys: [client_ip]
rules:
  - name: per_user
    match: [{key: user_id}]
    algorithm: fixed_window
    limits: [{name: minute, rate: 3, period: 1m}]
    plans:
      pro:
        limits: [{name: minute, rate: 5, period: 1m}]
  - name: per_key
    match: [{key: api_key}]
    algorithm: fixed_window
    limits: [{name: minute, rate: 2, period: 1m}]
  - name: per_ip
    match: [{key: client_ip}]
    algorithm: fixed_window
    limits: [{name: minute, rate: 3, period: 1m}]
`

const gatewayYAML = `rules: rules.yaml
listeners: [{addr: "127.0.0.1:0"}]
auth:
  users:
    jwt:
      keys: [{file: hs256.key, algorithms: [HS256]}]
      issuer: https://issuer.test
      audience: [api]
      plan_claim: plan
  partners:
    api_keys:
      keys: [{id: acme, hash: "HASH", plan: pro}]
routes:
  - name: users
    path_prefix: /users/
    upstreams: [UPSTREAM]
    auth: users
    limits:
      domain: api
      descriptors: [[user_id]]
  - name: partners
    path_prefix: /partners/
    strip_prefix: true
    upstreams: [UPSTREAM]
    auth: partners
    limits:
      domain: api
      descriptors: [[api_key]]
  - name: public
    path_prefix: /public/
    upstreams: [UPSTREAM]
    limits:
      domain: api
      descriptors: [[client_ip]]
`

// seen is what the upstream saw of a request.
type seen struct {
	Path, Subject, Plan, Method, ForwardedFor string
}

type env struct {
	gw       *httptest.Server
	upstream chan seen
}

func start(t *testing.T) *env {
	t.Helper()
	up := make(chan seen, 100)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up <- seen{r.URL.Path, r.Header.Get("X-Bouncer-Subject"), r.Header.Get("X-Bouncer-Plan"), r.Header.Get("X-Bouncer-Auth-Method"), r.Header.Get("X-Forwarded-For")}
		io.WriteString(w, "upstream ok")
	}))
	t.Cleanup(upstream.Close)
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("hs256.key", secret)
	write("rules.yaml", rulesYAML)
	write("gateway.yaml", strings.NewReplacer("UPSTREAM", upstream.URL, "HASH", auth.HashKey("acme-secret-key")).Replace(gatewayYAML))
	cfg, err := gateway.Load(filepath.Join(dir, "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rules.Load(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	srv := httptest.NewServer(newGateway(t, cfg, rc, clock.Now))
	t.Cleanup(srv.Close)
	return &env{srv, up}
}

// newGateway is a gateway serving cfg, limiting with the rules of rc on a
// memory store that counts on now (nil: the wall clock). The end of the
// test closes both.
func newGateway(t *testing.T, cfg *gateway.Config, rc *rules.Config, now func() time.Time) *gateway.Gateway {
	t.Helper()
	store := memstore.New(memstore.Options{Now: now})
	t.Cleanup(func() { store.Close() })
	g, err := gateway.New(cfg, gateway.Options{Engine: rules.NewEngine(rc, store), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

func token(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	base := jwt.MapClaims{"iss": "https://issuer.test", "aud": "api", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		base[k] = v
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, base).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func (e *env) get(t *testing.T, path string, hdr ...string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.gw.URL+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &a.body); err != nil {
			t.Fatalf("GET %s: body %q is not JSON: %v", path, b, err)
		}
	}
	return a
}

func TestAuthenticateThenLimitThenProxy(t *testing.T) {
	e := start(t)
	if a := e.get(t, "/nowhere"); a.status != 404 || a.body["error"] != "no_route" {
		t.Fatalf("unknown route: %d %v, want 404 no_route", a.status, a.body)
	}
	// Failed authentication answers 401 and charges nobody.
	attacks := map[string]string{
		"no token":       "",
		"garbage":        "Bearer not.a.token",
		"expired":        "Bearer " + token(t, jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()}),
		"wrong audience": "Bearer " + token(t, jwt.MapClaims{"aud": "other"}),
		"wrong issuer":   "Bearer " + token(t, jwt.MapClaims{"iss": "https://evil.test"}),
		"alg none":       "Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsImF1ZCI6ImFwaSIsImlzcyI6Imh0dHBzOi8vaXNzdWVyLnRlc3QiLCJleHAiOjQxMDI0NDQ4MDB9.",
	}
	for name, h := range attacks {
		for range 5 {
			a := e.get(t, "/users/me", "Authorization", h)
			if a.status != 401 || a.body["error"] != "unauthenticated" || a.header.Get("WWW-Authenticate") == "" {
				t.Fatalf("%s: %d %v, want 401 unauthenticated with WWW-Authenticate", name, a.status, a.body)
			}
		}
	}
	alice := "Bearer " + token(t, nil)
	for i := range 3 {
		a := e.get(t, "/users/me", "Authorization", alice, "X-Bouncer-Subject", "mallory")
		if a.status != 200 {
			t.Fatalf("alice's request %d: %d %v, want 200 (the failed attempts charged nobody)", i, a.status, a.body)
		}
		if got, want := a.header.Get("RateLimit"), `"minute";r=`+string(rune('2'-i))+";t=60"; got != want {
			t.Errorf("alice's request %d: RateLimit %q, want %q", i, got, want)
		}
		if s := <-e.upstream; s.Subject != "alice" || s.Method != "jwt" || s.Path != "/users/me" {
			t.Errorf("upstream saw %+v, want alice by jwt at /users/me, never the client's X-Bouncer-Subject", s)
		}
	}
	a := e.get(t, "/users/me", "Authorization", alice)
	if a.status != 429 || a.body["error"] != "rate_limited" || a.header.Get("Retry-After") == "" || a.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("alice's 4th: %d %v %v, want 429 rate_limited with Retry-After and X-RateLimit-Remaining 0", a.status, a.body, a.header)
	}
	select {
	case s := <-e.upstream:
		t.Fatalf("a denied request reached the upstream: %+v", s)
	default:
	}
	// A caller on the pro plan gets the plan's limits.
	bob := "Bearer " + token(t, jwt.MapClaims{"sub": "bob", "plan": "pro"})
	for i := range 6 {
		want := 200
		if i == 5 {
			want = 429
		}
		if a := e.get(t, "/users/me", "Authorization", bob); a.status != want {
			t.Fatalf("bob (pro) request %d: %d, want %d", i, a.status, want)
		}
		if i < 5 {
			if s := <-e.upstream; s.Plan != "pro" {
				t.Errorf("upstream saw plan %q, want pro", s.Plan)
			}
		}
	}
}

func TestAPIKeysAndClientIP(t *testing.T) {
	e := start(t)
	if a := e.get(t, "/partners/x", "X-API-Key", "wrong"); a.status != 401 {
		t.Fatalf("a wrong key: %d, want 401", a.status)
	}
	for i, want := range []int{200, 200, 429} {
		if a := e.get(t, "/partners/x", "X-API-Key", "acme-secret-key"); a.status != want {
			t.Fatalf("acme request %d: %d, want %d", i, a.status, want)
		}
		if want == 200 {
			if s := <-e.upstream; s.Subject != "acme" || s.Path != "/x" || s.Method != "api_key" {
				t.Errorf("upstream saw %+v, want acme by api_key at /x (prefix stripped)", s)
			}
		}
	}
	// A spoofed X-Forwarded-For from an untrusted peer changes nothing:
	// every request is the socket peer's.
	for i, spoof := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4"} {
		want := 200
		if i == 3 {
			want = 429
		}
		if a := e.get(t, "/public/p", "X-Forwarded-For", spoof); a.status != want {
			t.Fatalf("public request %d claiming %s: %d, want %d", i, spoof, a.status, want)
		}
		if want == 200 {
			if s := <-e.upstream; s.ForwardedFor != "127.0.0.1" {
				t.Errorf("upstream's X-Forwarded-For %q, want the peer alone (127.0.0.1), the client's claim dropped", s.ForwardedFor)
			}
		}
	}
}

// TestConfigErrorsNameFileAndLine checks that each problem of a config
// names the file, the line and the field, whether the config's own check
// finds it (Parse) or the package that serves that part (New).
func TestConfigErrorsNameFileAndLine(t *testing.T) {
	const top = "listeners: [{addr: x}]\n"
	const plain = "routes: [{name: a, path_prefix: /, upstreams: [\"http://h:1\"]}]\n"
	cases := map[string]struct{ yaml, want string }{
		"unknown field": {top + "routes:\n  - name: a\n    path_prefx: /\n", `g.yaml:4: routes[0]: unknown field "path_prefx"`},
		"bad prefix":    {top + "routes:\n  - name: a\n    path_prefix: a\n    upstreams: [http://h:1]\n", `g.yaml:3: routes[0] (a).path_prefix: route: route "a": PathPrefix "a": must start with "/"`},
		"unknown auth":  {top + "routes:\n  - name: a\n    path_prefix: /\n    upstreams: [http://h:1]\n    auth: nope\n", `g.yaml:3: routes[0] (a).auth: no auth named "nope"`},
		"bad fact":      {"rules: r.yaml\n" + top + "routes:\n  - name: a\n    path_prefix: /\n    upstreams: [http://h:1]\n    limits: {domain: d, descriptors: [[userid]]}\n", `g.yaml:7: routes[0] (a).limits.descriptors[0]: "userid" is not a fact`},
		"key in clear":  {top + "auth:\n  k:\n    api_keys:\n      keys: [{id: a, hash: secret}]\n" + plain, `g.yaml:5: auth.k.api_keys.keys[0].hash: auth: api_key "k": key "a": hash must be "sha256:"`},
		"second key's algorithm": {top + "auth:\n  u:\n    jwt:\n      keys:\n        - {jwks_url: \"https://idp.test/a\"}\n        - {jwks_url: \"https://idp.test/b\", algorithms: [none]}\n" + plain,
			`g.yaml:7: auth.u.jwt.keys[1].algorithms: auth: jwt "u": key source 1: algorithm "none" is not one of HS256, RS256, ES256, EdDSA`},
		"health path":   {top + "routes:\n  - name: a\n    path_prefix: /\n    upstreams: [http://h:1]\n    health_check:\n      path: healthz\n", `g.yaml:7: routes[0] (a).health_check.path: route: route "a": Health.Path "healthz"`},
		"gRPC upstream": {top + "routes:\n  - name: a\n    path_prefix: /\n    grpc:\n      descriptor_set: x.pb\n      upstream: \"ftp://h:1\"\n", `g.yaml:6: routes[0] (a).grpc.upstream: route: route "a": Upstreams[0] "ftp://h:1": scheme "ftp"`},
		"client auth":   {"listeners:\n  - addr: x\n    tls: {cert_file: c.pem, key_file: k.pem, client_auth: verify}\n" + plain, `g.yaml:3: listeners[0].tls.client_auth: tlsreload: ClientAuth "verify"`},
		"proxies":       {top + "trusted_proxies: [10.0.0.0/33]\n" + plain, `g.yaml:1: trusted_proxies: `},
		"health field":  {top + "routes:\n  - name: a\n    path_prefix: /\n    upstreams: [http://h:1]\n    health_check:\n      path: /h\n      intervl: 1s\n", `g.yaml:8: routes[0].health_check: unknown field "intervl" (did you mean interval?)`},
		// New failing after it made parts of the gateway once closed a
		// nil Gateway, and panicked.
		"missing key file": {top + "auth:\n  u:\n    jwt:\n      keys: [{file: missing.pem, algorithms: [RS256]}]\n" + plain, `g.yaml:5: auth.u.jwt.keys[0].file: auth: jwt "u": key source 0: file missing.pem: open missing.pem: no such file`},
		"no algorithms":    {top + "auth:\n  u:\n    jwt:\n      keys:\n        - file: k.pem\n" + plain, `g.yaml:6: auth.u.jwt.keys[0].algorithms: auth: jwt "u": key source 0: file k.pem: no Algorithms`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := gateway.Parse("g.yaml", []byte(c.yaml))
			if err == nil {
				var g *gateway.Gateway
				if g, err = gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)}); err == nil {
					g.Close()
				}
			}
			var ce *gateway.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse and New: %v, want a *ConfigError containing %q", err, c.want)
			}
		})
	}
}
