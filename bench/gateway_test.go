package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/rules"
)

// gwCallers are BenchmarkGateway's numbers of concurrent callers.
var gwCallers = []int{1, 64}

// BenchmarkGateway measures an authenticated, allowed request through
// each proxy over real loopback connections: a load generator of 1 or 64
// callers (goroutines, each with a keep-alive client of its own, a clone
// of http.DefaultTransport) making one request after another, a GET of
// gwPath with the same valid Authorization: Bearer token (every
// implementation gets it; the gateways verify it, nginx limits by it),
// its body read to the end and closed; the proxy on a loopback listener
// of its own; and behind it an upstream on another, an httptest.Server
// serving mwOK (two bytes). Each implementation has an upstream of its
// own. One op is one request; the b.N requests are dealt out evenly to
// the callers.
//
// Each caller's connection to the proxy is opened before the clock
// starts, by a first request of every caller at once; the benchmark
// fails if any request fails or is not a 200 with mwBody (no
// implementation's limit denies), if a caller opens a new connection
// during a run (keep-alive was lost) beyond one per keepaliveRequests
// requests of an implementation that closes its connections after so
// many (nginx, 1000 at its defaults; it then reports them as
// proxy-conns/op), unless a request afterwards shows, for a gateway, the
// limit counted, if any answer was decided without the store's backend
// (the Bouncer-Degraded header), and if nginx logged an error. Besides
// ns/op (wall time over b.N, all callers together) it reports
//
//	requests/s         b.N over the wall time of the run
//	p50-µs             median latency of one request, as its caller sees it
//	p99-µs             99th percentile
//	cpu-µs/op          CPU time, user and system, that the benchmark's
//	                   process (callers, proxy, upstream) and, for nginx,
//	                   nginx's master and workers (from /proc) used,
//	                   over b.N: the proxy's whole cost beside another's,
//	                   whatever else the machine runs (not Redis's, a
//	                   server shared with others)
//	upstream-conns/op  connections the upstream accepted during the run,
//	                   over b.N: how often the proxy's transport had to
//	                   dial instead of reusing an idle connection
//	degraded           (Redis) answers decided without Redis: 0, or the
//	                   run fails, not being a valid run on a healthy Redis
//
// bare-reverseproxy's are the baseline: what a gateway adds is its
// latency less bare's, what it costs its throughput over bare's.
//
// Last, impl=redis-roundtrip/callers=1 is the yardstick of what a
// request on Redis adds: one caller's round trips to the standalone Redis
// of BOUNCER_REDIS_ADDR (see benchRedisRoundTrip), with their p50-µs and
// p99-µs. Like the Redis row it skips without BOUNCER_REDIS_ADDR (fails
// under BOUNCER_REQUIRE_REDIS).
func BenchmarkGateway(b *testing.B) {
	token := gwToken(b)
	for _, im := range gwImpls {
		b.Run("impl="+im.name, func(b *testing.B) {
			up := startGwUpstream(b, mwOK)
			p := im.start(b, up.url)
			target := p.url + gwPath
			clients, dials := gwClients(b, slices.Max(gwCallers))
			// Every caller's first request at once, so that the proxy's
			// transport fills its pool of upstream connections as a
			// run does.
			errs := make([]error, len(clients))
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Go(func() { _, errs[i] = gwGet(c, target, token) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					b.Fatalf("first request of caller %d: %v", i, err)
				}
			}
			if got := dials.Load(); got != int64(len(clients)) {
				b.Fatalf("%d connections after each caller's first request, want %d", got, len(clients))
			}
			for _, n := range gwCallers {
				b.Run("callers="+strconv.Itoa(n), func(b *testing.B) {
					d0, u0 := dials.Load(), up.conns.Load()
					degraded := gwRun(b, target, token, clients[:n], p.cpu)
					// Each caller's requests cross at most one closing
					// connection per keepaliveRequests, rounded up.
					var allowed int64
					if k := im.keepaliveRequests; k > 0 {
						allowed = int64(b.N/k + n)
					}
					d := dials.Load() - d0
					if d > allowed {
						b.Fatalf("%d new connections to the proxy during the run, want at most %d (keep-alive)", d, allowed)
					}
					if degraded > 0 {
						b.Fatalf("%d answers with %s, want none: decided without the store's backend, not a valid run", degraded, rules.DegradedHeader)
					}
					b.ReportMetric(float64(up.conns.Load()-u0)/float64(b.N), "upstream-conns/op")
					if im.keepaliveRequests > 0 {
						b.ReportMetric(float64(d)/float64(b.N), "proxy-conns/op")
					}
					if p.stats != nil {
						if err := p.stats(); err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(0, "degraded") // any would have failed the run above
					}
				})
			}
			h, err := gwGet(clients[0], target, token)
			if err != nil {
				b.Fatal(err)
			}
			if im.gateway {
				if err := gwCounted(h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("impl="+gwRoundTrip, func(b *testing.B) {
		c := dialRoundTrip(b)
		b.Run("callers=1", func(b *testing.B) { benchRedisRoundTrip(b, c) })
	})
}

// gwRun makes b.N requests of url with token from the clients, one
// goroutine each, reports throughput, latency percentiles and CPU time
// (the process's, plus cpu's when it is not nil: see gwProxy), and
// returns how many answers carried rules.DegradedHeader.
func gwRun(b *testing.B, url, token string, clients []*http.Client, cpu func() (time.Duration, error)) (degraded int64) {
	lat := make([]time.Duration, b.N)
	var failed, deg atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g, c := range clients {
		// Caller g makes requests lo to hi-1 and times them into its own
		// part of lat.
		lo, hi := g*b.N/len(clients), (g+1)*b.N/len(clients)
		mine := lat[lo:hi:hi]
		wg.Go(func() {
			var f, d int64
			<-start
			for j := range mine {
				t0 := time.Now()
				h, err := gwGet(c, url, token)
				mine[j] = time.Since(t0)
				if err != nil {
					if f++; f == 1 {
						firstErr.CompareAndSwap(nil, &err)
					}
				} else if h.Get(rules.DegradedHeader) != "" {
					d++
				}
			}
			failed.Add(f)
			deg.Add(d)
		})
	}
	// The other processes' CPU time is read outside the process's
	// window, which it would add to.
	other0 := otherCPU(b, cpu)
	// Collect the setup's and the previous run's garbage before the clock
	// starts.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	close(start)
	wg.Wait()
	b.StopTimer()
	used := processCPU(b) - cpu0
	used += otherCPU(b, cpu) - other0
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d requests failed or not answered 200 with the upstream's body (first: %v), want all allowed", f, *firstErr.Load())
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(micros(percentile(lat, 0.50)), "p50-µs")
	b.ReportMetric(micros(percentile(lat, 0.99)), "p99-µs")
	b.ReportMetric(micros(used)/float64(b.N), "cpu-µs/op")
	return deg.Load()
}

// otherCPU returns cpu's CPU time, or 0 if cpu is nil.
func otherCPU(tb testing.TB, cpu func() (time.Duration, error)) time.Duration {
	if cpu == nil {
		return 0
	}
	d, err := cpu()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// gwRoundTrip is BenchmarkGateway's row of Redis round trips.
const gwRoundTrip = "redis-roundtrip"

// gwRoundTripScript is what a round trip runs: a script that does
// nothing, sent as EVALSHA (EVAL once, when Redis answers NOSCRIPT).
var gwRoundTripScript = rueidis.NewLuaScript("return 1")

// dialRoundTrip returns a client of the standalone Redis of
// BOUNCER_REDIS_ADDR with the options the Redis store connects with
// (redisstore.Client: no client-side cache, no auto-pipelining),
// closed when tb ends, once it has made a round trip (loading the
// script). Without BOUNCER_REDIS_ADDR it skips tb (fails it under
// BOUNCER_REQUIRE_REDIS).
func dialRoundTrip(tb testing.TB) rueidis.Client {
	tb.Helper()
	c, err := rueidis.NewClient(redisstore.ClientOption(redisAddrs(tb, redisTopologies[0])))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	if err := redisRoundTrip(context.Background(), c); err != nil {
		tb.Fatal(err)
	}
	return c
}

// redisRoundTrip makes one round trip with c: gwRoundTripScript, whose
// answer must be 1.
func redisRoundTrip(ctx context.Context, c rueidis.Client) error {
	n, err := gwRoundTripScript.Exec(ctx, c, nil, nil).AsInt64()
	if err != nil || n != 1 {
		return fmt.Errorf("redis round trip: %d, %v, want 1", n, err)
	}
	return nil
}

// benchRedisRoundTrip times b.N round trips with c from one caller, one
// after another, and reports their p50-µs and p99-µs: what one call of
// the Redis store to a server on loopback costs at the least. The store's
// call is an FCALL of a function it loaded once; an EVALSHA of a cached
// script takes the same way through rueidis and Redis (a command on a
// pooled connection, a script found by name, Lua entered and left, an
// integer answered) without the limit's own work, which PING would not
// (no Lua). What the gateway on Redis adds over the gateway on the
// memory store is that call, the store's work around it and the limit's
// Lua: ratios.go sets it beside this.
func benchRedisRoundTrip(b *testing.B, c rueidis.Client) {
	ctx := context.Background()
	lat := make([]time.Duration, b.N)
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range lat {
		t0 := time.Now()
		err := redisRoundTrip(ctx, c)
		lat[i] = time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(micros(percentile(lat, 0.50)), "p50-µs")
	b.ReportMetric(micros(percentile(lat, 0.99)), "p99-µs")
}

// processCPU is the CPU time, user and system, the process has used: the
// clients', the proxy's and the upstream's together. Unlike the wall
// time, it does not grow when something else on the machine takes the
// CPU.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gwGet makes a GET of url with c, carrying token as a bearer token
// unless it is "", reads the body to its end, and returns the answer's
// headers, or an error unless it was a 200 with mwBody.
func gwGet(c *http.Client, url, token string) (http.Header, error) {
	code, h, body, err := gwDo(c, url, token)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK || body != len(mwBody) {
		return nil, fmt.Errorf("status %d, %d bytes, want 200, %d", code, body, len(mwBody))
	}
	return h, nil
}

// gwDo makes a GET of url with c, carrying token as a bearer token
// unless it is "", reads the body to its end, and returns the status,
// the headers and the body's length.
func gwDo(c *http.Client, url, token string) (int, http.Header, int, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, int(n), err
}

// gwCounted reports an error unless the gateway's answer headers h show
// the request counted against gwLimit: X-RateLimit-Remaining below it.
func gwCounted(h http.Header) error {
	v := h.Get("X-RateLimit-Remaining")
	if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 || n >= gwLimit {
		return fmt.Errorf("X-RateLimit-Remaining: %q, want a number from 0 to %d: the limit was not counted", v, gwLimit-1)
	}
	return nil
}

// gwClients returns n keep-alive clients, each on a clone of
// http.DefaultTransport of its own, and the count of connections they
// have dialed. They are closed when tb ends.
func gwClients(tb testing.TB, n int) ([]*http.Client, *atomic.Int64) {
	tb.Helper()
	var dials atomic.Int64
	clients := make([]*http.Client, n)
	for i := range clients {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, network, addr)
		}
		tb.Cleanup(tr.CloseIdleConnections)
		clients[i] = &http.Client{Transport: tr}
	}
	return clients, &dials
}

// gwUpstream is the server behind the proxies: its URL, and the
// connections it has accepted.
type gwUpstream struct {
	url   string
	conns *atomic.Int64
}

// startGwUpstream serves h on a loopback listener (httptest.Server) until
// tb ends.
func startGwUpstream(tb testing.TB, h http.Handler) gwUpstream {
	tb.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	return gwUpstream{srv.URL, &conns}
}

// TestGatewayBenchSetup checks BenchmarkGateway's implementations: each
// answers 200 with the upstream's body to a request with the token; the
// gateways answer 401 without it, never reaching the upstream, and with
// it carry the rate-limit headers, show the request counted, decide
// with the store's backend, and tell the upstream who the caller is; a
// peer whose answers do not show its limit (nginx) denies, once started
// at one request a minute, a token's second request with 429, and not
// another token's first. Its last subtest makes a Redis round trip as
// BenchmarkGateway's redis-roundtrip does.
func TestGatewayBenchSetup(t *testing.T) {
	token := gwToken(t)
	for _, im := range gwImpls {
		t.Run("impl="+im.name, func(t *testing.T) {
			var reached atomic.Int64
			var subject atomic.Pointer[string]
			up := startGwUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached.Add(1)
				s := r.Header.Get("X-Bouncer-Subject")
				subject.Store(&s)
				mwOK.ServeHTTP(w, r)
			}))
			p := im.start(t, up.url)
			clients, _ := gwClients(t, 1)
			c, url := clients[0], p.url+gwPath
			for i := range 3 {
				h, err := gwGet(c, url, token)
				if err != nil {
					t.Fatalf("request %d with the token: %v", i, err)
				}
				if !im.gateway {
					continue
				}
				for _, name := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
					if h.Get(name) == "" {
						t.Errorf("request %d: no %s header, want the rate-limit headers", i, name)
					}
				}
				if err := gwCounted(h); err != nil {
					t.Errorf("request %d: %v", i, err)
				}
				if v := h.Get(rules.DegradedHeader); v != "" {
					t.Errorf("request %d: %s: %q, want none", i, rules.DegradedHeader, v)
				}
				if s := subject.Load(); s == nil || *s != gwSubject {
					t.Errorf("request %d: the upstream saw X-Bouncer-Subject %v, want %q", i, s, gwSubject)
				}
			}
			if got := reached.Load(); got != 3 {
				t.Fatalf("the upstream got %d requests, want 3", got)
			}
			if im.gateway {
				code, h, _, err := gwDo(c, url, "")
				if err != nil {
					t.Fatal(err)
				}
				if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
					t.Errorf("without the token: status %d, WWW-Authenticate %q, want 401 with one", code, h.Get("WWW-Authenticate"))
				}
				if got := reached.Load(); got != 3 {
					t.Errorf("the upstream got %d requests, want 3: the one without the token reached it", got)
				}
			}
			if p.stats != nil {
				if err := p.stats(); err != nil {
					t.Error(err)
				}
			}
			if im.limited != nil {
				gwCheckLimited(t, im.limited(t, up.url), token)
			}
		})
	}
	t.Run("impl="+gwRoundTrip, func(t *testing.T) {
		if err := redisRoundTrip(context.Background(), dialRoundTrip(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// gwCheckLimited checks the implementation at url, which allows one
// request a minute per token: a first request with token is allowed, a
// second denied with 429, and another token's first allowed.
func gwCheckLimited(t *testing.T, url, token string) {
	t.Helper()
	clients, _ := gwClients(t, 1)
	for i, step := range []struct {
		token string
		code  int
	}{
		{token, http.StatusOK},
		{token, http.StatusTooManyRequests},
		{token + "-another", http.StatusOK},
	} {
		code, _, _, err := gwDo(clients[0], url+gwPath, step.token)
		if err != nil {
			t.Fatal(err)
		}
		if code != step.code {
			t.Errorf("at one request a minute per token, request %d: status %d, want %d", i, code, step.code)
		}
	}
}
