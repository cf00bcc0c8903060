package rlqs_test

import (
	"context"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/storetest"
)

// thirty is one bucket limited to 30 requests a second.
const thirty = `domain: fair
descriptors:
  - key: api
    rate_limit: {unit: second, requests_per_unit: 30}
`

// rawStream is a stream that reports what a test tells it to, as a
// client that lies could.
type rawStream struct {
	t *testing.T
	s pb.RateLimitQuotaService_StreamRateLimitQuotasClient
}

func openRaw(t *testing.T, cc *grpc.ClientConn) *rawStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := pb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &rawStream{t: t, s: s}
}

// report reports n requests (allowed) of apiBucket over elapsed, and
// returns the assignment, nil if the bucket is abandoned.
func (r *rawStream) report(n uint64, elapsed time.Duration) *typepb.RateLimitStrategy {
	r.t.Helper()
	err := r.s.Send(&pb.RateLimitQuotaUsageReports{Domain: "fair", BucketQuotaUsages: []*pb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &pb.BucketId{Bucket: apiBucket}, NumRequestsAllowed: n, TimeElapsed: durationpb.New(elapsed),
	}}})
	if err != nil {
		r.t.Fatal(err)
	}
	resp, err := r.s.Recv()
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy()
}

// fairServer serves thirty on clock.
func fairServer(t *testing.T, clock *storetest.Clock) *rlqs.Server {
	return &rlqs.Server{Engine: engine(t, thirty, clock), Now: clock.Now}
}

// The scenario of the review: A and B ask 100/s each of 30/s, and C 9/s,
// then 10/s. A share kept by hysteresis is never above the new one, so
// the assignments in force add up to 30/s at most in every round.
func TestSharesStayWithinTheRate(t *testing.T) {
	clock := storetest.NewClock(start)
	srv := fairServer(t, clock)
	a, b, c := openRaw(t, serve(t, srv)), openRaw(t, serve(t, srv)), openRaw(t, serve(t, srv))
	interval := rlqs.DefaultInterval
	for round := range 8 {
		perSec := uint64(9)
		if round >= 4 {
			perSec = 10
		}
		n := func(perSec uint64) uint64 { return perSec * uint64(interval/time.Second) }
		rates := []float64{rlqs.Rate(a.report(n(100), interval)), rlqs.Rate(b.report(n(100), interval)), rlqs.Rate(c.report(n(perSec), interval))}
		if sum := rates[0] + rates[1] + rates[2]; round > 0 && sum > 30*(1+1e-9) {
			t.Errorf("round %d (C at %d/s): assigned %.2f + %.2f + %.2f = %.2f/s, past the limit 30/s", round, perSec, rates[0], rates[1], rates[2], sum)
		}
		clock.Advance(interval)
	}
}

// Fifty streams of one connection, claiming a huge demand, are one
// client: the honest proxy on another connection gets its fair share of
// 30/s, half, and the fifty together the other half.
func TestStreamsOfOneConnectionAreOneClient(t *testing.T) {
	clock := storetest.NewClock(start)
	srv := fairServer(t, clock)
	srv.MaxConnStreams = 50 // past the default bound, which refuses the 9th: fairness holds without it
	honest := openRaw(t, serve(t, srv))
	cc := serve(t, srv)
	sybils := make([]*rawStream, 50)
	for i := range sybils {
		sybils[i] = openRaw(t, cc)
	}
	interval := rlqs.DefaultInterval
	var mine, theirs float64
	for range 5 {
		mine, theirs = rlqs.Rate(honest.report(100*5, interval)), 0
		for _, s := range sybils {
			theirs += rlqs.Rate(s.report(1e6, interval))
		}
		clock.Advance(interval)
	}
	if mine < 15*0.95 || theirs > 15*(1+1e-9) {
		t.Errorf("the honest proxy assigned %.2f/s and fifty streams of one connection %.2f/s; want 15/s and at most 15/s", mine, theirs)
	}
}

// A bucket reported with no request and a time_elapsed of 0 or less
// is measured on the server's clock: it asks a request an interval, and
// is abandoned after an assignment's life, like any idle bucket.
func TestIdleWhateverTimeElapsedSays(t *testing.T) {
	for _, elapsed := range []time.Duration{0, -time.Hour} {
		t.Run(elapsed.String(), func(t *testing.T) {
			clock := storetest.NewClock(start)
			srv := fairServer(t, clock)
			idle, busy := openRaw(t, serve(t, srv)), openRaw(t, serve(t, srv))
			interval := rlqs.DefaultInterval
			var got *typepb.RateLimitStrategy
			for round := 0; ; round++ {
				got = idle.report(0, elapsed)
				if r := rlqs.Rate(busy.report(100*5, interval)); round >= 2 && r < 29 {
					t.Errorf("round %d: the busy proxy assigned %.2f/s beside an idle one, want at least 29/s", round, r)
				}
				if got == nil || round > 10 {
					break
				}
				clock.Advance(interval)
			}
			if idleFor := clock.Now().Sub(start); got != nil || idleFor > srv.TTL() {
				t.Errorf("after %v idle: assigned %v, want abandoned after the TTL %v", idleFor, got, srv.TTL())
			}
		})
	}
}

// A client's reported demand is bounded: time_elapsed does not count (the
// server measures it), and a demand counts up to twice what the client
// could admit under its share, or twice an equal share, whichever is
// more.
func TestLiarsDemandBounded(t *testing.T) {
	interval := rlqs.DefaultInterval
	t.Run("a short time_elapsed", func(t *testing.T) {
		clock := storetest.NewClock(start)
		srv := fairServer(t, clock)
		liar, honest := openRaw(t, serve(t, srv)), openRaw(t, serve(t, srv))
		var lied, fair float64
		for range 4 {
			lied, fair = rlqs.Rate(liar.report(5, time.Millisecond)), rlqs.Rate(honest.report(100*5, interval))
			clock.Advance(interval)
		}
		if lied > 1.05 || fair < 28 {
			t.Errorf("1/s reported over 1 ms every 5 s: assigned %.2f/s, the honest proxy %.2f/s; want 1/s and 29/s", lied, fair)
		}
	})
	t.Run("a sudden huge demand", func(t *testing.T) {
		clock := storetest.NewClock(start)
		srv := fairServer(t, clock)
		liar, a, b := openRaw(t, serve(t, srv)), openRaw(t, serve(t, srv)), openRaw(t, serve(t, srv))
		for range 4 { // each asks 1/s
			liar.report(5, interval)
			a.report(5, interval)
			b.report(5, interval)
			clock.Advance(interval)
		}
		liar.report(1e9, interval) // measured, then divided at the next epoch
		a.report(5, interval)
		b.report(5, interval)
		clock.Advance(interval)
		// Its share was 1/s, an equal share 10/s: it counts as 20/s.
		if got := rlqs.Rate(liar.report(1e9, interval)); got > 20*(1+1e-9) || got < 19 {
			t.Errorf("a huge demand after 1/s: assigned %.2f/s, want 20/s", got)
		}
	})
}

// countedDemands counts a Demands' calls.
type countedDemands struct {
	rlqs.Demands
	records, reads int
}

func (c *countedDemands) RecordDemand(ctx context.Context, bucket, client string, demand float64, interval, ttl time.Duration) (int64, error) {
	c.records++
	return c.Demands.RecordDemand(ctx, bucket, client, demand, interval, ttl)
}

func (c *countedDemands) DemandsAt(ctx context.Context, bucket string, epoch int64, interval time.Duration) (map[string]float64, error) {
	c.reads++
	return c.Demands.DemandsAt(ctx, bucket, epoch, interval)
}

// A report writes its client's demand, and a server reads a bucket's
// demands once an epoch, however many clients report it.
func TestDemandsReadOnceAnEpoch(t *testing.T) {
	clock := storetest.NewClock(start)
	demands := &countedDemands{Demands: rlqs.NewLocalDemands(clock.Now)}
	srv := &rlqs.Server{Engine: engine(t, thirty, clock), Demands: demands, Now: clock.Now, MaxConnStreams: 20}
	cc := serve(t, srv)
	proxies := make([]*rawStream, 20)
	for i := range proxies {
		proxies[i] = openRaw(t, cc) // one at a time: the count is exact
	}
	const rounds = 3
	for range rounds {
		for _, p := range proxies {
			p.report(10, rlqs.DefaultInterval)
		}
		clock.Advance(rlqs.DefaultInterval)
	}
	if demands.records != rounds*len(proxies) || demands.reads != rounds {
		t.Errorf("%d rounds of %d reports: %d demands recorded and %d reads of the bucket; want %d and %d", rounds, len(proxies), demands.records, demands.reads, rounds*len(proxies), rounds)
	}
}
