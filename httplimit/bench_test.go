package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/memstore"
)

// discardWriter is a ResponseWriter that keeps nothing but its header.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkMiddleware measures an allowed request through the middleware
// (one rule per client IP, a token bucket, the memory store at its
// defaults) against the bare handler, over 10 000 client addresses.
func BenchmarkMiddleware(b *testing.B) {
	const n = 10_000
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
		reqs[i].RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
	}
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	store := memstore.New(memstore.Options{})
	defer store.Close()
	mw, err := httplimit.Middleware(store, []httplimit.Rule{{Name: "per_ip", Key: httplimit.IP(nil), Limits: []bouncer.Limit{
		{Name: "s", Algorithm: bouncer.TokenBucket, Rate: 1000, Period: time.Second, Burst: 1 << 30},
	}}}, httplimit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	quiet, err := httplimit.Middleware(store, []httplimit.Rule{{Name: "per_ip", Key: httplimit.IP(nil), Limits: []bouncer.Limit{
		{Name: "s", Algorithm: bouncer.TokenBucket, Rate: 1000, Period: time.Second, Burst: 1 << 30},
	}}}, httplimit.Options{DeniedOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"httplimit", mw(bare)}, {"httplimit-deniedonly", quiet(bare)}} {
		b.Run("impl="+c.name, func(b *testing.B) {
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				clear(w.h)
				w.code = 0
				c.h.ServeHTTP(w, reqs[i])
				if w.code != 0 && w.code != http.StatusOK {
					b.Fatalf("status %d, want every request allowed", w.code)
				}
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}
