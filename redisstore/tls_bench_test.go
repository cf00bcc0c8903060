//go:build unix

package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// BenchmarkTLS measures what TLS costs a store at its defaults: the same
// server (the TLS test server, which has a plain port beside its TLS
// one), the same checks (GCRA over 10 000 keys below their limit), over
// plain TCP and over mutual TLS, side by side in one run, from 64
// callers and from one. Besides ns/op it reports "decisions/s", the
// checks' latency "p50-µs" and "p99-µs", and "degraded" (checks decided
// without Redis: 0, or the figures do not measure the transport).
func BenchmarkTLS(b *testing.B) {
	srv := sharedTLS(b, false)
	l := bouncer.Limit{Name: "tls", Algorithm: bouncer.GCRA, Rate: 1 << 20, Burst: 1 << 20, Period: time.Hour}
	reqs := make([]bouncer.Request, 10000)
	for i := range reqs {
		reqs[i] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "tls-" + strconv.Itoa(i), Limits: []bouncer.Limit{l}}}, Cost: 1}
	}
	for _, callers := range []int{64, 1} {
		for _, transport := range []string{"plain", "tls"} {
			b.Run(fmt.Sprintf("callers=%d/transport=%s", callers, transport), func(b *testing.B) {
				url, files := "redis://"+srv.PlainAddr, (*redisstore.TLSFiles)(nil)
				if transport == "tls" {
					url, files = tlsURL(srv), mutualTLS(srv)
				}
				s := newURLStore(b, url, files, redisstore.Options{Timeout: redisstore.DefaultTimeout})
				waitConnected(b, s)
				benchChecks(b, s, reqs, callers)
			})
		}
	}
}

// benchChecks runs b.N checks of reqs on s from callers goroutines, and
// reports their rate, latency and degraded count.
func benchChecks(b *testing.B, s *redisstore.Store, reqs []bouncer.Request, callers int) {
	var next, degraded atomic.Int64
	var mu sync.Mutex
	var took []time.Duration
	run := func(more func() bool) {
		mine := make([]time.Duration, 0, 1024)
		for more() {
			req := reqs[int(next.Add(1))%len(reqs)]
			start := time.Now()
			d, err := s.Check(context.Background(), req)
			mine = append(mine, time.Since(start))
			if err != nil {
				b.Errorf("check: %v", err)
				return
			}
			if d.Degraded {
				degraded.Add(1)
			}
		}
		mu.Lock()
		took = append(took, mine...)
		mu.Unlock()
	}
	b.ReportAllocs()
	start := time.Now()
	if callers == 1 {
		run(b.Loop)
	} else {
		b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
	}
	elapsed := time.Since(start)
	slices.Sort(took)
	if len(took) == 0 {
		return
	}
	b.ReportMetric(float64(len(took))/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(degraded.Load()), "degraded")
}
