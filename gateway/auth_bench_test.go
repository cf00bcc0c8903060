//go:build unix

package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/gateway/auth"
)

// BenchmarkAuth measures an allowed request through the gateway's
// ServeHTTP on a route with authentication, beside the same request on
// a route without, in the same run: each op is one request on the
// authenticated route, and the benchmark makes as many on the route
// without, in rounds that alternate with them (see benchRoutes), timed
// apart. docs/benchmarks.md ("Gateway authentication at scale") reads
// it. It reports
//
//	cpu-ns/op         the CPU time (user and system) of the process per
//	                  request on the authenticated route
//	noauth-cpu-ns/op  the same on the route without authentication
//	x-noauth          noauth-cpu-ns/op over cpu-ns/op: the authenticated
//	                  route's throughput per core as a fraction of the
//	                  route without's (1 is as fast)
//
// CPU time rather than wall time, because on a machine that other work
// shares the wall time of a run swings more than authentication costs.
//
// route=none is the yardstick of the method: its /auth/ route has no
// authentication either, so its x-noauth is 1 but for the noise.
//
// The routes are otherwise alike: no limits, and an upstream that is a
// RoundTripper answering 200 "ok" in the process, so that what differs is
// authentication alone. The callers are 1 or 64 goroutines, each making
// one request after another.
//
//	route=apikey/keys=N   N API keys configured; each request presents
//	                      one of 1000 of them, taken in turn
//	route=jwt/tokens=N/cache=C   each request presents the next of N
//	                      valid ES256 tokens, taken in turn (round
//	                      robin), to a JWT authenticator with CacheTokens
//	                      C; every token was presented once before the
//	                      clock starts
//
// Every request must be answered 200, or the benchmark fails.
func BenchmarkAuth(b *testing.B) {
	cases := []struct {
		name string
		auth func(b *testing.B) (gateway.Auth, []header)
	}{
		{"route=none", noAuth},
		{"route=apikey/keys=10", apiKeyAuth(10)},
		{"route=apikey/keys=10000", apiKeyAuth(10_000)},
		{"route=apikey/keys=1000000", apiKeyAuth(1_000_000)},
		{"route=jwt/tokens=100/cache=default", jwtAuth(100, 0)},
		{"route=jwt/tokens=100000/cache=default", jwtAuth(100_000, 0)},
		{"route=jwt/tokens=100000/cache=100000", jwtAuth(100_000, 100_000)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			a, creds := c.auth(b)
			g := authGateway(b, a)
			warm(b, g, creds)
			var next atomic.Uint64 // the auth route's turn through creds, from run to run
			for _, callers := range []int{1, 64} {
				b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
					benchRoutes(b, g, callers, creds, &next)
				})
			}
		})
	}
}

// warm presents every credential of creds once to /auth/, on as many
// goroutines as there are cores.
func warm(b *testing.B, g http.Handler, creds []header) {
	var failed atomic.Int64
	var wg sync.WaitGroup
	procs := runtime.GOMAXPROCS(0)
	for w := range procs {
		wg.Go(func() {
			for i := w; i < len(creds); i += procs {
				if serve(g, "/auth/x", creds[i]) != http.StatusOK {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		b.Fatalf("warming: %d credentials not answered 200, want all", n)
	}
}

// header is one credential: a header, its name in canonical form, and
// its value.
type header struct{ name, value string }

// benchRoutes makes b.N requests on /auth/ and b.N on /open/ from
// callers goroutines, in rounds that alternate between the routes (so
// that a change in the machine's load during the run falls on both), and
// reports their CPU times and the ratio of them. A collection runs
// before each round's part, outside the measure: a collection of a heap
// that the cache or a million keys make large takes more CPU than a
// part's requests, and would fall on whichever route it came in. Each request carries the
// next of creds: on /auth/, the one after the *next-th, which the
// benchmark's runs share, so that they go round creds in turn.
func benchRoutes(b *testing.B, g http.Handler, callers int, creds []header, next *atomic.Uint64) {
	var failed atomic.Int64
	// run makes n requests on path, with the credentials after the
	// *next-th, and adds the CPU time they took to *cpu.
	run := func(path string, n int, next *atomic.Uint64, cpu *time.Duration) {
		var done atomic.Int64
		var wg sync.WaitGroup
		c0 := cpuTime(b)
		for range callers {
			wg.Go(func() {
				for done.Add(1) <= int64(n) {
					h := creds[(next.Add(1)-1)%uint64(len(creds))]
					if serve(g, path, h) != http.StatusOK {
						failed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		*cpu += cpuTime(b) - c0
	}
	const rounds = 8
	var open, authed time.Duration
	var openNext atomic.Uint64
	b.ReportAllocs()
	b.StopTimer()
	for i := range rounds {
		n := (i+1)*b.N/rounds - i*b.N/rounds
		if i%2 == 0 {
			runtime.GC()
			run("/open/x", n, &openNext, &open)
		}
		runtime.GC()
		b.StartTimer()
		run("/auth/x", n, next, &authed)
		b.StopTimer()
		if i%2 == 1 {
			runtime.GC()
			run("/open/x", n, &openNext, &open)
		}
	}
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d requests not answered 200, want all", n)
	}
	b.ReportMetric(float64(authed.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(open.Nanoseconds())/float64(b.N), "noauth-cpu-ns/op")
	b.ReportMetric(float64(open)/float64(authed), "x-noauth")
}

// cpuTime is the CPU time, user and system, the process has used.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// serve makes one GET of path with h on g, from a client at 192.0.2.1,
// and returns its status.
func serve(g http.Handler, path string, h header) int {
	r := &http.Request{
		Method: http.MethodGet, URL: &url.URL{Path: path}, RequestURI: path, Host: "gw.test",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, RemoteAddr: "192.0.2.1:1234",
		Header: http.Header{h.name: {h.value}},
	}
	w := &discardWriter{h: http.Header{}}
	g.ServeHTTP(w, r)
	return w.code
}

// discardWriter is a ResponseWriter that keeps nothing but its status.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(p), nil
}
func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

// okTransport is an upstream in the process: it answers 200 "ok".
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Length": {"2"}}, ContentLength: 2, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// authGateway is a gateway with two routes to okTransport: /open/
// without authentication and /auth/ with a (without, if a is the zero
// Auth); the end of the benchmark closes it.
func authGateway(b *testing.B, a gateway.Auth) *gateway.Gateway {
	b.Helper()
	cfg, err := gateway.Parse("bench.yaml", []byte(`listeners: [{addr: "127.0.0.1:0"}]
routes:
  - {name: open, path_prefix: /open/, upstreams: ["http://upstream.test"]}
  - {name: auth, path_prefix: /auth/, upstreams: ["http://upstream.test"], auth: a}
auth:
  a:
    api_keys: {keys: [{id: placeholder, hash: "`+auth.HashKey("placeholder")+`"}]}
`))
	if err != nil {
		b.Fatal(err)
	}
	if a == (gateway.Auth{}) {
		cfg.Routes[1].Auth = ""
		delete(cfg.Auth, "a")
	} else {
		cfg.Auth["a"] = a
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Transport: okTransport{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(g.Close)
	return g
}

// noAuth configures no authentication; the credential is a header that
// nothing reads.
func noAuth(*testing.B) (gateway.Auth, []header) {
	return gateway.Auth{}, []header{{"X-Unread", "x"}}
}

// apiKeyAuth configures n API keys; the credentials are 1000 of them
// (all when fewer), spread over the table.
func apiKeyAuth(n int) func(b *testing.B) (gateway.Auth, []header) {
	return func(b *testing.B) (gateway.Auth, []header) {
		keys := make([]auth.APIKey, n)
		for i := range keys {
			keys[i] = auth.APIKey{ID: "key-" + strconv.Itoa(i), Hash: auth.HashKey("bk_secret_" + strconv.Itoa(i)), Plan: "pro"}
		}
		var creds []header
		for i := 0; i < n; i += max(1, n/1000) {
			creds = append(creds, header{http.CanonicalHeaderKey(auth.DefaultAPIKeyHeader), "bk_secret_" + strconv.Itoa(i)})
		}
		return gateway.Auth{APIKeys: &auth.APIKeyConfig{Name: "a", Keys: keys}}, creds
	}
}

// jwtAuth configures a JWT authenticator of one ES256 key with
// CacheTokens size; the credentials are n valid tokens of it.
func jwtAuth(n, size int) func(b *testing.B) (gateway.Auth, []header) {
	return func(b *testing.B) (gateway.Auth, []header) {
		k, toks := benchTokens(b, n)
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			b.Fatal(err)
		}
		file := filepath.Join(b.TempDir(), "es256.pem")
		if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
			b.Fatal(err)
		}
		creds := make([]header, n)
		for i, t := range toks[:n] {
			creds[i] = header{"Authorization", "Bearer " + t}
		}
		c := &auth.JWTConfig{Name: "a", Keys: []auth.KeySource{{File: file, Algorithms: []string{auth.ES256}}}, CacheTokens: size}
		return gateway.Auth{JWT: c}, creds
	}
}

// tokenSet is the ES256 key and the tokens signed with it that every
// case of BenchmarkAuth shares: signing 100 000 takes seconds.
var tokenSet struct {
	mu   sync.Mutex
	key  *ecdsa.PrivateKey
	toks []string
}

// benchTokens returns the shared key and at least n valid tokens, each of
// its own subject, valid for two hours from their signing.
func benchTokens(b *testing.B, n int) (*ecdsa.PrivateKey, []string) {
	tokenSet.mu.Lock()
	defer tokenSet.mu.Unlock()
	if tokenSet.key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		tokenSet.key = k
	}
	from := len(tokenSet.toks)
	if from >= n {
		return tokenSet.key, tokenSet.toks
	}
	tokenSet.toks = append(tokenSet.toks, make([]string, n-from)...)
	now := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, runtime.GOMAXPROCS(0))
	for w := range errs {
		wg.Go(func() {
			for i := from + w; i < n; i += len(errs) {
				claims := jwt.MapClaims{"sub": fmt.Sprint("user-", i), "iat": now.Unix(), "exp": now.Add(2 * time.Hour).Unix()}
				tokenSet.toks[i], errs[w] = jwt.NewWithClaims(jwt.SigningMethodES256, claims).SignedString(tokenSet.key)
				if errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return tokenSet.key, tokenSet.toks
}

// BenchmarkAuthConfigFile measures gateway.Parse and gateway.New of a
// config file holding 30 000 API keys, about as many as the bounds on a
// file allow (MaxFileSize, and the YAML values a file may stand for):
// an op is one Parse and New, heap-MiB is the heap the Gateway holds
// afterwards, the config included, and file-MiB the file's size.
func BenchmarkAuthConfigFile(b *testing.B) {
	const n = 30_000
	var yaml strings.Builder
	yaml.WriteString("listeners: [{addr: \"127.0.0.1:0\"}]\nroutes:\n  - {name: a, path_prefix: /, upstreams: [\"http://upstream.test\"], auth: k}\nauth:\n  k:\n    api_keys:\n      keys:\n")
	for i := range n {
		fmt.Fprintf(&yaml, "        - {id: key-%d, hash: %q, plan: pro}\n", i, auth.HashKey("bk_secret_"+strconv.Itoa(i)))
	}
	data := []byte(yaml.String())
	if len(data) > gateway.MaxFileSize {
		b.Fatalf("%d bytes, over gateway.MaxFileSize", len(data))
	}
	var heap runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&heap)
		before := heap.HeapAlloc
		cfg, err := gateway.Parse("keys.yaml", data)
		if err != nil {
			b.Fatal(err)
		}
		g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Transport: okTransport{}})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&heap)
		b.ReportMetric(float64(heap.HeapAlloc-before)/(1<<20), "heap-MiB")
		runtime.KeepAlive(cfg)
		g.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(len(data))/(1<<20), "file-MiB")
}
