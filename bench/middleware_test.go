package bench

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mwBody is what the handler behind every middleware writes.
var mwBody = []byte("ok")

// mwOK is the handler behind every middleware: it writes mwBody.
var mwOK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(mwBody) })

// mwAddrs are the client addresses of BenchmarkMiddleware, one per key,
// made before it runs: 198.18.0.0/15 is set aside for benchmarks (RFC
// 2544).
var mwAddrs = func() []string {
	addrs := make([]string, 10_000)
	for i := range addrs {
		addrs[i] = net.JoinHostPort(fmt.Sprintf("198.18.%d.%d", i>>8, i&0xff), strconv.Itoa(40_000+i%20_000))
	}
	return addrs
}()

// mwRequests returns a GET / from each of the first n client addresses.
func mwRequests(n int) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
		reqs[i].RemoteAddr = mwAddrs[i]
	}
	return reqs
}

// BenchmarkMiddleware measures one allowed request through each HTTP
// middleware, in process: handler.ServeHTTP with a prebuilt request and a
// response writer that keeps headers in a map cleared before each request
// and discards the body, the same for every implementation, around mwOK.
// bare is mwOK alone, the baseline the others' overhead is taken against.
// Each middleware limits each client address to mwBenchLimit, which admits
// every request; keys=1 sends every request from one address, keys=10000
// cycles through 10 000 (RemoteAddr set per request), each sent once
// before the clock starts so that every request finds live state. serial
// is b.Loop; parallel is RunParallel, each goroutine with a writer of its
// own, starting at an address of its own.
//
// The benchmark fails if any response is not a 200 with mwBody, and
// unless the last response of each goroutine reports, in the middleware's
// own header, fewer requests remaining than the limit (the limit was
// counted).
func BenchmarkMiddleware(b *testing.B) {
	for _, im := range mwImpls {
		for _, n := range []int{1, 10_000} {
			reqs := mwRequests(n)
			name := fmt.Sprintf("impl=%s/keys=%d", im.name, n)
			b.Run(name+"/serial", func(b *testing.B) {
				h, done := mwHandler(b, im, reqs)
				defer done()
				w := newDiscardWriter()
				b.ReportAllocs()
				i, failed := 0, 0
				for b.Loop() {
					w.reset()
					h.ServeHTTP(w, reqs[i])
					if !w.served() {
						failed++
					}
					if i++; i == n {
						i = 0
					}
				}
				mwVerify(b, im, failed, w)
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				h, done := mwHandler(b, im, reqs)
				defer done()
				var next atomic.Uint64
				var failed atomic.Int64
				var mu sync.Mutex
				var last []*discardWriter
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					w := newDiscardWriter()
					i := int(next.Add(7919)) % n
					var made, f int64
					for pb.Next() {
						w.reset()
						h.ServeHTTP(w, reqs[i])
						if !w.served() {
							f++
						}
						if i++; i == n {
							i = 0
						}
						made++
					}
					failed.Add(f)
					if made > 0 {
						mu.Lock()
						last = append(last, w)
						mu.Unlock()
					}
				})
				b.StopTimer()
				mwVerify(b, im, int(failed.Load()), last...)
			})
		}
	}
}

// mwHandler returns im's middleware around mwOK under mwBenchLimit, having
// sent every request of reqs through it once, and what releases it.
func mwHandler(b *testing.B, im mwImpl, reqs []*http.Request) (http.Handler, func()) {
	b.Helper()
	wrap, done, err := im.new(mwBenchLimit)
	if err != nil {
		b.Fatal(err)
	}
	h := wrap(mwOK)
	w := newDiscardWriter()
	for _, r := range reqs {
		w.reset()
		h.ServeHTTP(w, r)
		if !w.served() {
			done()
			b.Fatalf("warming %s: status %d, %d bytes, want 200, %d", r.RemoteAddr, w.code, w.written, len(mwBody))
		}
	}
	// Collect the previous benchmark's garbage before the clock starts.
	runtime.GC()
	return h, done
}

// mwVerify fails b if any request failed, or if a last response ws does
// not show the limit counted.
func mwVerify(b *testing.B, im mwImpl, failed int, ws ...*discardWriter) {
	b.Helper()
	if failed > 0 {
		b.Fatalf("%d requests not answered 200 with the handler's body, want all allowed", failed)
	}
	for _, w := range ws {
		if err := counted(im, w.h); err != nil {
			b.Fatal(err)
		}
	}
}

// counted reports an error unless the response headers h show that im
// counted the request against mwBenchLimit: its remaining header holds a
// number below the limit. bare counts nothing.
func counted(im mwImpl, h http.Header) error {
	if im.remaining == "" {
		return nil
	}
	v := h.Get(im.remaining)
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || n >= float64(mwBenchLimit.N) {
		return fmt.Errorf("%s: %q, want a number from 0 to %d: the limit was not counted", im.remaining, v, mwBenchLimit.N-1)
	}
	return nil
}

// discardWriter is the response writer of BenchmarkMiddleware: it keeps
// the headers in a map it clears (keeping its room) between requests,
// records the status and counts the body's bytes.
type discardWriter struct {
	h       http.Header
	code    int
	written int
}

func newDiscardWriter() *discardWriter { return &discardWriter{h: make(http.Header)} }

func (w *discardWriter) Header() http.Header { return w.h }

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.written += len(p)
	return len(p), nil
}

func (w *discardWriter) reset() {
	clear(w.h)
	w.code, w.written = 0, 0
}

// served reports whether the request was answered by mwOK alone: 200 and
// mwBody.
func (w *discardWriter) served() bool { return w.code == http.StatusOK && w.written == len(mwBody) }

// mwCallers are BenchmarkMiddlewareLoopback's numbers of concurrent
// callers.
var mwCallers = []int{1, 64}

// BenchmarkMiddlewareLoopback measures the latency of an allowed request
// through each middleware over a real loopback connection: an
// httptest.Server (HTTP/1.1 at net/http's defaults) serving the middleware
// around mwOK, and 1 or 64 callers, goroutines each with a keep-alive
// client of its own (a clone of http.DefaultTransport) making one request
// after another: a GET, its body read to the end and closed. One op is
// one request; the b.N requests are dealt out evenly to the callers. All
// callers come from 127.0.0.1, so every middleware counts one key. Each
// caller's connection is opened before the clock starts, and the benchmark
// fails if any request fails or is not a 200 with mwBody, if the server
// sees a new connection during a run (keep-alive was lost), or unless a
// request afterwards shows the limit counted. Besides ns/op (wall time over
// b.N, all callers together) it reports
//
//	p50-µs  median latency of one request, in microseconds, as its caller sees it
//	p99-µs  99th percentile
//
// bare's are the server's and client's own; what a middleware adds is its
// latency less bare's.
func BenchmarkMiddlewareLoopback(b *testing.B) {
	for _, im := range mwImpls {
		b.Run("impl="+im.name, func(b *testing.B) {
			wrap, done, err := im.new(mwBenchLimit)
			if err != nil {
				b.Fatal(err)
			}
			defer done()
			var conns atomic.Int64
			srv := httptest.NewUnstartedServer(wrap(mwOK))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			clients := make([]*http.Client, slices.Max(mwCallers))
			for i := range clients {
				tr := http.DefaultTransport.(*http.Transport).Clone()
				defer tr.CloseIdleConnections()
				clients[i] = &http.Client{Transport: tr}
				if _, err := mwGet(clients[i], srv.URL); err != nil {
					b.Fatalf("first request of caller %d: %v", i, err)
				}
			}
			if got := conns.Load(); got != int64(len(clients)) {
				b.Fatalf("%d connections after each caller's first request, want %d", got, len(clients))
			}
			for _, n := range mwCallers {
				b.Run("callers="+strconv.Itoa(n), func(b *testing.B) {
					before := conns.Load()
					mwLoopbackRun(b, srv.URL, clients[:n])
					if got := conns.Load() - before; got != 0 {
						b.Fatalf("%d new connections during the run, want 0 (keep-alive)", got)
					}
				})
			}
			h, err := mwGet(clients[0], srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			if err := counted(im, h); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// mwLoopbackRun makes b.N requests of url from the clients, one goroutine
// each, and reports the latency percentiles.
func mwLoopbackRun(b *testing.B, url string, clients []*http.Client) {
	lat := make([]time.Duration, b.N)
	var failed atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g, c := range clients {
		// Caller g makes requests lo to hi-1 and times them into its own
		// part of lat.
		lo, hi := g*b.N/len(clients), (g+1)*b.N/len(clients)
		mine := lat[lo:hi:hi]
		wg.Go(func() {
			var f int64
			<-start
			for j := range mine {
				t0 := time.Now()
				_, err := mwGet(c, url)
				mine[j] = time.Since(t0)
				if err != nil {
					if f++; f == 1 {
						firstErr.CompareAndSwap(nil, &err)
					}
				}
			}
			failed.Add(f)
		})
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	close(start)
	wg.Wait()
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d requests failed or not answered 200 with the handler's body (first: %v), want all allowed", f, *firstErr.Load())
	}
	slices.Sort(lat)
	b.ReportMetric(latencyQuantile(lat, 0.50).Seconds()*1e6, "p50-µs")
	b.ReportMetric(latencyQuantile(lat, 0.99).Seconds()*1e6, "p99-µs")
}

// mwGet makes a GET of url with c, reads the body to its end, and returns
// the response's headers, or an error unless it was a 200 with mwBody.
func mwGet(c *http.Client, url string) (http.Header, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || n != int64(len(mwBody)) {
		return nil, fmt.Errorf("status %d, %d bytes, want 200, %d", resp.StatusCode, n, len(mwBody))
	}
	return resp.Header, nil
}

// latencyQuantile returns the nearest-rank q-quantile of sorted.
func latencyQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}
