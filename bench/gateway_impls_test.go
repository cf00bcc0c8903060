package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/metrics"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/rules"
)

// gwImpl is one proxy under test in front of an upstream.
type gwImpl struct {
	name string
	// start serves the implementation on a loopback listener in front of
	// upstream (a URL); what it starts is stopped by tb's cleanups.
	start func(tb testing.TB, upstream string) gwProxy
	// gateway is whether the implementation authenticates (401 without
	// the token) and limits (rate-limit headers on every answer).
	gateway bool
	// keepaliveRequests is how many requests the proxy serves on one
	// client connection before closing it, at its defaults; 0 is no
	// limit.
	keepaliveRequests int
	// limited, when not nil, starts the implementation as start does but
	// with a limit of one request a minute per token, and returns its
	// URL: for TestGatewayBenchSetup to check that a peer whose answers
	// do not show its limit applies one.
	limited func(tb testing.TB, upstream string) string
}

// gwProxy is a started implementation: its URL and what the benchmark
// asks it.
type gwProxy struct {
	url string
	// stats, when not nil, reports an error if the store decided
	// anything without its backend (the Redis store's own count).
	stats func() error
	// cpu, when not nil, returns the CPU time the implementation's
	// processes other than the benchmark's have used so far (nginx's
	// master and workers), which the benchmark adds to its own.
	cpu func() (time.Duration, error)
}

// gwBare is the baseline: a reverse proxy and nothing else.
const gwBare = "bare-reverseproxy"

// gwImpls are BenchmarkGateway's implementations; on Linux,
// gateway_nginx_test.go adds nginx (gwNginx) after them.
var gwImpls = []gwImpl{
	{name: gwBare, start: startBareProxy},
	{name: "bouncer-gateway-memory", start: startGatewayMemory, gateway: true},
	{name: "bouncer-gateway-redis", start: startGatewayRedis, gateway: true},
	{name: gwFloor, start: startGatewayFloor, gateway: true},
	{name: "caddy-reverseproxy", start: startCaddy},
}

// gwPath is the path every request of the gateway benchmarks asks for,
// under the gateway's one route.
const gwPath = "/api/ping"

// gwSecret is the HS256 key of the gateway's authenticator and of the
// token every request carries (at least 32 bytes, as auth requires).
const gwSecret = "the gateway benchmark's HS256 secret, 47 bytes."

// gwSubject is the user of the token: every request is hers, so every
// request is charged to one key.
const gwSubject = "bench-user"

// gwLimit is the one limit per user: 10⁸ an hour (a token bucket, the
// rules' default, with room for all of them at once). No run comes near
// it, and it refills slowly enough (about 28 000 a second) that the
// remaining count an answer reports shows that the request was counted.
const gwLimit = 100_000_000

const gwRulesYAML = `domain: bench
rules:
  - name: per_user
    match: [{key: user_id}]
    limits: [{name: hour, rate: 100000000, period: 1h}]
`

const gwConfigYAML = `rules: rules.yaml
listeners: [{addr: "127.0.0.1:0"}]
auth:
  users:
    jwt:
      keys: [{file: hs256.key, algorithms: [HS256]}]
      issuer: https://issuer.bench
      audience: [api]
routes:
  - name: api
    path_prefix: /api/
    upstreams: [UPSTREAM]
    auth: users
    limits:
      domain: bench
      descriptors: [[user_id]]
`

// gwToken returns a token the gateway accepts, valid for an hour: HS256
// over gwSecret, for gwSubject.
func gwToken(tb testing.TB) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "https://issuer.bench", "aud": "api", "sub": gwSubject, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(gwSecret))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// startBareProxy is httputil.NewSingleHostReverseProxy at its defaults
// (http.DefaultTransport: at most 2 idle connections to the upstream).
func startBareProxy(tb testing.TB, upstream string) gwProxy {
	tb.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	return gwProxy{url: gwServe(tb, httputil.NewSingleHostReverseProxy(u))}
}

func startGatewayMemory(tb testing.TB, upstream string) gwProxy {
	tb.Helper()
	s := memstore.New(memstore.Options{})
	tb.Cleanup(func() { s.Close() })
	return gwProxy{url: gwServe(tb, newGateway(tb, upstream, s))}
}

// startGatewayRedis is the gateway on the Redis store at its defaults on
// the standalone server of BOUNCER_REDIS_ADDR (skipped without it). Its
// keys go under a prefix of this run's own, deleted afterwards.
func startGatewayRedis(tb testing.TB, upstream string) gwProxy {
	tb.Helper()
	addrs := redisAddrs(tb, redisTopologies[0])
	prefix := "bouncer-" + runID + "-gateway"
	s, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption(addrs), Prefix: prefix, Timeout: smokeTimeout()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Close()
		c := redis.NewClient(&redis.Options{Addr: addrs[0]})
		defer c.Close()
		if err := deleteKeys(context.Background(), c, prefix+":*"); err != nil {
			tb.Errorf("deleting %s:*: %v", prefix, err)
		}
	})
	if h := s.Health(); !h.Connected {
		tb.Fatalf("Redis at %v: %+v, want connected", addrs, h)
	}
	stats := func() error {
		if st := s.Health(); st.Failures > 0 || st.DegradedN > 0 {
			return fmt.Errorf("redis store health: %+v, want no failures and nothing degraded", st)
		}
		return nil
	}
	return gwProxy{url: gwServe(tb, newGateway(tb, upstream, s)), stats: stats}
}

// gwFloor is the least a Redis-backed gateway can cost: the gateway on
// the memory store whose every decision first makes one Redis round trip
// (redisRoundTrip: a script that does nothing) — the round trip as the
// gateway pays it, in the middle of a request, rather than in a loop of
// its own (redis-roundtrip). What bouncer-gateway-redis adds beyond it is
// the Redis store's own work and the limit's Lua.
const gwFloor = "gateway-memory-plus-roundtrip"

func startGatewayFloor(tb testing.TB, upstream string) gwProxy {
	tb.Helper()
	c := dialRoundTrip(tb)
	s := memstore.New(memstore.Options{})
	tb.Cleanup(func() { s.Close() })
	return gwProxy{url: gwServe(tb, newGateway(tb, upstream, &roundTripFirst{Limiter: s, c: c}))}
}

// roundTripFirst makes one Redis round trip before each check it passes
// on to its Limiter; a failed round trip fails the check.
type roundTripFirst struct {
	bouncer.Limiter
	c rueidis.Client
}

func (r *roundTripFirst) Check(ctx context.Context, req bouncer.Request) (bouncer.Decision, error) {
	if err := redisRoundTrip(ctx, r.c); err != nil {
		return bouncer.Decision{}, err
	}
	return r.Limiter.Check(ctx, req)
}

// newGateway returns the gateway of gwConfigYAML in front of upstream
// over store, wired as bouncer gateway wires it: the rules' and the
// gateway's metrics on a registry of their own, the store timed by the
// rules' metrics, and the access log, one line per request at Info in
// bouncer gateway's default text format, written to io.Discard (the line
// is made; only the write is saved).
func newGateway(tb testing.TB, upstream string, store bouncer.Limiter) http.Handler {
	tb.Helper()
	return newGatewayOver(tb, upstream, store, nil)
}

// newGatewayOver is newGateway whose routes reach their upstream through
// transport (nil: the gateway's own).
func newGatewayOver(tb testing.TB, upstream string, store bouncer.Limiter, transport http.RoundTripper) http.Handler {
	tb.Helper()
	dir := tb.TempDir()
	for name, data := range map[string]string{
		"hs256.key":    gwSecret,
		"rules.yaml":   gwRulesYAML,
		"gateway.yaml": strings.Replace(gwConfigYAML, "UPSTREAM", upstream, 1),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	cfg, err := gateway.Load(filepath.Join(dir, "gateway.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	rc, err := rules.Load(cfg.Rules)
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rm := metrics.New(reg)
	rm.Serving(rc)
	engine := rules.NewEngine(rc, rm.Limiter(store))
	engine.Observe = rm.Observe
	g, err := gateway.New(cfg, gateway.Options{
		Engine:    engine,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:   gateway.NewMetrics(reg),
		Transport: transport,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(g.Close)
	return g
}

// gwServe serves h on a loopback listener (httptest.Server: HTTP/1.1 at
// net/http's defaults), the same for every Go implementation, until tb
// ends.
func gwServe(tb testing.TB, h http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv.URL
}
