package rlqs_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// perSecond1000 is one bucket limited to 60 000 requests a minute.
const perSecond1000 = `domain: fleet
descriptors:
  - key: api
    rate_limit: {unit: minute, requests_per_unit: 60000}
`

// BenchmarkFleetVsRLS runs one fleet, three proxies offering 70, 20 and
// 10 % of twice a limit of 60 000 a minute for four minutes on a
// simulated clock, against RLQS (each proxy decides locally and reports
// every 5 s) and against RLS (a call per request): the calls each makes
// per 1000 requests offered, and the most and least any whole minute
// admitted, as a fraction of the limit.
func BenchmarkFleetVsRLS(b *testing.B) {
	offered := []float64{2000 * .7, 2000 * .2, 2000 * .1} // a second
	for b.Loop() {
		calls, requests, perWin := fleetRLQS(b, offered)
		b.ReportMetric(1000*float64(calls)/float64(requests), "rlqs-calls/1000req")
		lo, hi := spread(perWin, 60000)
		b.ReportMetric(hi, "rlqs-max-minute/limit")
		b.ReportMetric(lo, "rlqs-min-minute/limit")
		calls, requests, perWin = fleetRLS(b, offered)
		b.ReportMetric(1000*float64(calls)/float64(requests), "rls-calls/1000req")
		lo, hi = spread(perWin, 60000)
		b.ReportMetric(hi, "rls-max-minute/limit")
		b.ReportMetric(lo, "rls-min-minute/limit")
	}
}

// spread is the least and the most any whole minute of perWin admitted,
// as fractions of limit.
func spread(perWin map[int64]int, limit int) (lo, hi float64) {
	first, last := int64(math.MaxInt64), int64(0)
	for w := range perWin {
		first, last = min(first, w), max(last, w)
	}
	lo = math.Inf(1)
	for w := first + 1; w < last; w++ {
		f := float64(perWin[w]) / float64(limit)
		lo, hi = min(lo, f), max(hi, f)
	}
	return lo, hi
}

func fleetRLQS(b *testing.B, offered []float64) (calls, requests int, perWin map[int64]int) {
	clock := storetest.NewClock(start)
	srv := &rlqs.Server{Engine: engine(b, perSecond1000, clock), Now: clock.Now}
	var cs []*rlqs.Client
	for range offered { // proxies: a connection each
		c, err := rlqs.NewClient(context.Background(), serve(b, srv), rlqs.ClientOptions{Domain: "fleet", Now: clock.Now})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	perWin = map[int64]int{}
	dues := make([]float64, len(cs))
	ctx := context.Background()
	for _, c := range cs {
		c.Allow(apiBucket)
		requests++
		if err := c.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		calls++
	}
	step, since := 20*time.Millisecond, time.Duration(0)
	for elapsed := time.Duration(0); elapsed < 4*time.Minute; elapsed += step {
		clock.Advance(step)
		since += step
		for i, c := range cs {
			dues[i] += offered[i] * step.Seconds()
			n := int(dues[i])
			dues[i] -= float64(n)
			for range n {
				requests++
				if c.Allow(apiBucket) {
					perWin[clock.Now().Unix()/60]++
				}
			}
		}
		if since >= rlqs.DefaultInterval {
			since = 0
			for _, c := range cs {
				if err := c.Sync(ctx); err != nil {
					b.Fatal(err)
				}
				calls++
			}
		}
	}
	return calls, requests, perWin
}

func fleetRLS(b *testing.B, offered []float64) (calls, requests int, perWin map[int64]int) {
	clock := storetest.NewClock(start)
	e := engine(b, perSecond1000, clock)
	perWin = map[int64]int{}
	dues := make([]float64, len(offered))
	r := rules.Request{Domain: "fleet", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "api", Value: "orders"}}}}}
	step := 20 * time.Millisecond
	for elapsed := time.Duration(0); elapsed < 4*time.Minute; elapsed += step {
		clock.Advance(step)
		for i := range offered {
			dues[i] += offered[i] * step.Seconds()
			n := int(dues[i])
			dues[i] -= float64(n)
			for range n {
				requests++
				calls++
				resp, err := e.Decide(context.Background(), r)
				if err != nil {
					b.Fatal(err)
				}
				if resp.Code == rules.OK {
					perWin[clock.Now().Unix()/60]++
				}
			}
		}
	}
	return calls, requests, perWin
}

// BenchmarkFleetRound is one round of a fleet's reports over gRPC on
// loopback: 1000 streams (over 125 connections, as many streams each as
// a connection may open, DefaultMaxConnStreams) each report 100 buckets
// at once, every bucket shared by 10 streams, and wait for their
// answers, with the clients in the same process. A fleet reporting every
// 5 s is held while a round takes well under 5 s (ns/op).
func BenchmarkFleetRound(b *testing.B) {
	clock := storetest.NewClock(start)
	srv := &rlqs.Server{Engine: engine(b, benchFleet, clock), Now: clock.Now}
	var conns []*grpc.ClientConn
	streams := make([]pb.RateLimitQuotaService_StreamRateLimitQuotasClient, 1000)
	for range len(streams) / rlqs.DefaultMaxConnStreams {
		conns = append(conns, serveConn(b, srv))
	}
	msgs := make([]*pb.RateLimitQuotaUsageReports, len(streams))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range streams {
		s, err := pb.NewRateLimitQuotaServiceClient(conns[i%len(conns)]).StreamRateLimitQuotas(ctx)
		if err != nil {
			b.Fatal(err)
		}
		streams[i] = s
		msg := &pb.RateLimitQuotaUsageReports{Domain: "fleet"}
		for k := range 100 {
			msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &pb.RateLimitQuotaUsageReports_BucketQuotaUsage{
				BucketId:           &pb.BucketId{Bucket: map[string]string{"tenant": fmt.Sprint("t", (i%100)*100+k)}},
				TimeElapsed:        durationpb.New(rlqs.DefaultInterval),
				NumRequestsAllowed: 400, NumRequestsDenied: 100,
			})
		}
		msgs[i] = msg
	}
	round := func() {
		var wg sync.WaitGroup
		for i, s := range streams {
			wg.Go(func() {
				if err := s.Send(msgs[i]); err != nil {
					b.Error(err)
					return
				}
				if _, err := s.Recv(); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	round() // the buckets' first reports
	for b.Loop() {
		round()
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N)/rlqs.DefaultInterval.Seconds()*100, "%-of-interval")
}

const benchFleet = `domain: fleet
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 6000}
`
