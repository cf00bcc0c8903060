package rlqs

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// benchConfig limits each tenant's bucket to 6000 requests a minute.
const benchConfig = `domain: bench
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 6000}
`

func benchServer(b *testing.B) *Server {
	b.Helper()
	return benchServerAt(b, nil)
}

// benchServerAt is benchServer on the clock now (time.Now when nil).
func benchServerAt(b *testing.B, now func() time.Time) *Server {
	b.Helper()
	cfg, err := rules.Parse("bench.yaml", []byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New(memstore.Options{Now: now})
	b.Cleanup(func() { st.Close() })
	e := rules.NewEngine(cfg, st)
	e.Now = now
	s := &Server{Engine: e, Now: now}
	s.once.Do(s.init) // as a stream's first call does
	return s
}

// report is a stream's report of buckets tenants first..first+n-1, each
// having allowed 400 requests and denied 100 in 5 s.
func report(first, n int) *pb.RateLimitQuotaUsageReports {
	msg := &pb.RateLimitQuotaUsageReports{Domain: "bench"}
	for i := range n {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &pb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           &pb.BucketId{Bucket: map[string]string{"tenant": fmt.Sprint("t", first+i)}},
			TimeElapsed:        durationpb.New(DefaultInterval),
			NumRequestsAllowed: 400,
			NumRequestsDenied:  100,
		})
	}
	return msg
}

// BenchmarkReport is the server's work for one stream's report of 100
// buckets (every bucket reported by 10 streams, as in a fleet of 1000
// streams whose 100 buckets each are shared ten ways), on the memory
// store at its defaults, without the gRPC transport: ns/op is the CPU
// of one report, ns/bucket of one bucket's part in it.
func BenchmarkReport(b *testing.B) {
	s := benchServer(b)
	ctx := context.Background()
	streams := make([]*stream, 10)
	for i := range streams {
		streams[i] = &stream{s: s, client: s.clientID(), domain: "bench", subs: map[string]*subscription{}}
	}
	msg := report(0, 100)
	for _, st := range streams {
		st.answer(ctx, msg) // the buckets' first reports
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		streams[i%len(streams)].answer(ctx, msg)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/bucket")
	// Shares computed without the demands store, the degraded answers
	// of this service: none may count on a healthy store.
	b.ReportMetric(float64(s.Stats().Unshared), "unshared")
}

// BenchmarkFleetCost is the server's work for one bucket's report when
// every proxy of a fleet (a connection each) reports the same 5 buckets
// every interval, as a fleet sharing global limits does: ns/op is one
// proxy's report of its 5 buckets, µs/report one bucket's part in it, on
// the memory store at its defaults, without the gRPC transport. The
// clock moves an interval after each round, so each round is an epoch
// and each bucket is divided again at its first report.
func BenchmarkFleetCost(b *testing.B) {
	for _, n := range []int{250, 1000, 2000, 5000} {
		b.Run(fmt.Sprintf("proxies=%d", n), func(b *testing.B) {
			clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
			s := benchServerAt(b, clock.Now)
			ctx := context.Background()
			streams := make([]*stream, n)
			msg := report(0, 5)
			for i := range streams {
				streams[i] = &stream{s: s, client: s.clientID(), peer: fmt.Sprint("proxy", i), domain: "bench", subs: map[string]*subscription{}}
				streams[i].answer(ctx, msg) // the buckets' first reports
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%n == 0 {
					clock.Advance(DefaultInterval)
				}
				streams[i%n].answer(ctx, msg)
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/5/1000, "µs/report")
		})
	}
}

// BenchmarkFleetMemory is the server's memory for a fleet of 1000
// streams reporting 100 buckets each, every bucket shared by 10 streams
// (10 000 buckets, 100 000 subscriptions): the heap the streams' state,
// the shared demands and the store's counts take, per subscription (a
// stream's bucket), without the gRPC transport's buffers.
func BenchmarkFleetMemory(b *testing.B) {
	for b.Loop() {
		s := benchServer(b)
		ctx := context.Background()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		streams := make([]*stream, 1000)
		for i := range streams {
			st := &stream{s: s, client: s.clientID(), domain: "bench", subs: map[string]*subscription{}}
			st.answer(ctx, report((i%100)*100, 100))
			streams[i] = st
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(streams)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(streams)*100), "bytes/subscription")
	}
}
