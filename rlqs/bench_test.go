package rlqs

import (
	"context"
	"fmt"
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

func benchServer(b *testing.B) *Server { return benchServerOf(b, benchConfig, nil) }

// benchServerOf is a Server of config body on a memory store at its
// defaults, on the clock now (time.Now when nil).
func benchServerOf(b *testing.B, body string, now func() time.Time) *Server {
	b.Helper()
	cfg, err := rules.Parse("bench.yaml", []byte(body))
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
		streams[i] = benchStream(b, s, fmt.Sprint("proxy", i))
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
			s := benchServerOf(b, benchConfig, clock.Now)
			ctx := context.Background()
			streams := make([]*stream, n)
			msg := report(0, 5)
			for i := range streams {
				st, err := s.open(fmt.Sprint("proxy", i))
				if err != nil {
					b.Fatal(err)
				}
				st.domain, streams[i] = "bench", st
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
// streams (one connection each) reporting 100 buckets each, every
// bucket shared by 10 streams (10 000 buckets, 100 000 subscriptions),
// ids of three short entries (fleetReport): the live heap after GC
// that the streams' state, the shared demands and the store's counts
// take, per subscription (a stream's bucket), without the gRPC
// transport's buffers.
func BenchmarkFleetMemory(b *testing.B) {
	for b.Loop() {
		s := benchServerOf(b, fleetConfig, nil)
		perSub := heapPerSubscription(b, s, 1000, 1, func(i, _ int) *pb.RateLimitQuotaUsageReports {
			return fleetReport((i%100)*100, 100)
		})
		b.ReportMetric(perSub, "bytes/subscription")
		b.ReportMetric(float64(s.Stats().IDBytes)/float64(s.Stats().Subscriptions), "id-bytes/subscription")
	}
}
