package rlqs_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

const mixed = `domain: mix
descriptors:
  - key: tenant
    descriptors:
      - key: method
        value: GET
        rate_limit: {unit: minute, requests_per_unit: 600}
  - key: internal
    rate_limit: {unlimited: true}
  - key: banned
    rate_limit: {unit: second, requests_per_unit: 0}
`

// A bucket id is matched against the rules as an RLS descriptor is, in
// whatever order of its keys the rule's branch names: a limited rule
// assigns a token bucket, an unlimited one ALLOW_ALL, a rule of 0
// DENY_ALL, and a bucket no rule matches is abandoned.
func TestBucketsMatchRules(t *testing.T) {
	clock := storetest.NewClock(start)
	cc := serve(t, &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now})
	c := client(t, cc, rlqs.ClientOptions{Domain: "mix", Now: clock.Now})
	ids := []map[string]string{
		{"method": "GET", "tenant": "a"}, // the branch names tenant first
		{"internal": "x"},
		{"banned": "y"},
		{"method": "POST", "tenant": "a"},
		{"nothing": "z"},
	}
	for _, id := range ids {
		c.Allow(id)
	}
	syncAll(t, c)
	want := []float64{10, math.Inf(1), 0}
	for i, w := range want {
		s := c.Assignment(ids[i])
		if s == nil || rlqs.Rate(s) != w {
			t.Errorf("bucket %v: assigned %v (rate %v), want rate %v", ids[i], s, rlqs.Rate(s), w)
		}
	}
	for _, id := range ids[3:] {
		if s := c.Assignment(id); s != nil {
			t.Errorf("bucket %v: assigned %v, want it abandoned", id, s)
		}
	}
}

// What RLQS clients report as allowed is counted where RLS checks of the
// same descriptor count: one config serves both, and they share counts.
func TestSharesCountsWithRLS(t *testing.T) {
	clock := storetest.NewClock(start)
	e := engine(t, mixed, clock)
	cc := serve(t, &rlqs.Server{Engine: e, Now: clock.Now})
	c := client(t, cc, rlqs.ClientOptions{Domain: "mix", Now: clock.Now})
	id := map[string]string{"tenant": "t", "method": "GET"}
	for range 7 {
		c.Allow(id)
	}
	syncAll(t, c)
	clock.Advance(time.Second)
	resp, err := e.Decide(context.Background(), rules.Request{Domain: "mix", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "tenant", Value: "t"}, {Key: "method", Value: "GET"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Statuses[0].Remaining; got != 600-7-1 {
		t.Errorf("an RLS check after 7 reported requests: remaining %d, want %d", got, 600-7-1)
	}
}

// A bucket whose rule a reload removes is abandoned at its next report;
// one idle for an assignment's life is abandoned too.
func TestAbandon(t *testing.T) {
	clock := storetest.NewClock(start)
	e := engine(t, mixed, clock)
	srv := &rlqs.Server{Engine: e, Now: clock.Now}
	cc := serve(t, srv)
	c := client(t, cc, rlqs.ClientOptions{Domain: "mix", Now: clock.Now})
	get, internal := map[string]string{"tenant": "t", "method": "GET"}, map[string]string{"internal": "i"}
	c.Allow(get)
	c.Allow(internal)
	syncAll(t, c)
	cfg, err := rules.Parse("rlqs.yaml", []byte(strings.Replace(mixed, "        value: GET\n", "        value: PUT\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(cfg)
	clock.Advance(time.Second)
	c.Allow(get)
	syncAll(t, c)
	if s := c.Assignment(get); s != nil {
		t.Errorf("after a reload without its rule: assigned %v, want abandoned", s)
	}
	if s := c.Assignment(internal); s == nil {
		t.Fatal("the other bucket was abandoned too")
	}
	for range int(srv.TTL() / rlqs.DefaultInterval) {
		clock.Advance(rlqs.DefaultInterval)
		syncAll(t, c)
	}
	if s := c.Assignment(internal); s != nil {
		t.Errorf("after an idle TTL: assigned %v, want abandoned", s)
	}
}

// Streams that misbehave get an error or abandon_action, and never hold
// more than their bound.
func TestMisbehavingStreams(t *testing.T) {
	clock := storetest.NewClock(start)
	srv := &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now, MaxBuckets: 10}
	cc := serve(t, srv, grpc.MaxRecvMsgSize(64<<10))
	raw := func(t *testing.T) pb.RateLimitQuotaService_StreamRateLimitQuotasClient {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		s, err := pb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	usage := func(id map[string]string) *pb.RateLimitQuotaUsageReports_BucketQuotaUsage {
		return &pb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &pb.BucketId{Bucket: id}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 1}
	}
	wantCode := func(t *testing.T, s pb.RateLimitQuotaService_StreamRateLimitQuotasClient, code codes.Code) {
		t.Helper()
		_, err := s.Recv()
		if status.Code(err) != code {
			t.Errorf("got %v, want %v", err, code)
		}
	}
	t.Run("no domain", func(t *testing.T) {
		s := raw(t)
		_ = s.Send(&pb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*pb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"internal": "x"})}})
		wantCode(t, s, codes.InvalidArgument)
	})
	t.Run("changing domain", func(t *testing.T) {
		s := raw(t)
		_ = s.Send(&pb.RateLimitQuotaUsageReports{Domain: "mix"})
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		_ = s.Send(&pb.RateLimitQuotaUsageReports{Domain: "other"})
		wantCode(t, s, codes.InvalidArgument)
	})
	t.Run("huge message", func(t *testing.T) {
		s := raw(t)
		_ = s.Send(&pb.RateLimitQuotaUsageReports{Domain: "mix", BucketQuotaUsages: []*pb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"internal": strings.Repeat("x", 100<<10)})}})
		wantCode(t, s, codes.ResourceExhausted)
	})
	t.Run("a flood of bucket ids", func(t *testing.T) {
		s := raw(t)
		msg := &pb.RateLimitQuotaUsageReports{Domain: "mix"}
		for i := range 25 {
			msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, usage(map[string]string{"internal": fmt.Sprint(i)}))
		}
		_ = s.Send(msg)
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		assigned := 0
		for i, a := range resp.GetBucketAction() {
			switch {
			case a.GetQuotaAssignmentAction() != nil:
				assigned++
			case a.GetAbandonAction() == nil:
				t.Errorf("action %d: neither assigned nor abandoned", i)
			}
		}
		if len(resp.GetBucketAction()) != 25 || assigned != 10 {
			t.Errorf("25 buckets on a stream of at most 10: %d actions, %d assigned; want 25, 10", len(resp.GetBucketAction()), assigned)
		}
	})
	t.Run("a bucket id too wide", func(t *testing.T) {
		s := raw(t)
		id := map[string]string{}
		for i := range rules.MaxBucketEntries + 1 {
			id[fmt.Sprint("k", i)] = "v"
		}
		_ = s.Send(&pb.RateLimitQuotaUsageReports{Domain: "mix", BucketQuotaUsages: []*pb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(id)}})
		resp, err := s.Recv()
		if err != nil || len(resp.GetBucketAction()) != 1 || resp.GetBucketAction()[0].GetAbandonAction() == nil {
			t.Errorf("got %v, %v; want the bucket abandoned", resp, err)
		}
	})
	t.Run("a client that never reads", func(t *testing.T) {
		s := raw(t)
		msg := &pb.RateLimitQuotaUsageReports{Domain: "mix"}
		for i := range 10 {
			msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, usage(map[string]string{"internal": strings.Repeat(fmt.Sprint(i), 1000)}))
		}
		// Reports until the flow-control windows are full both ways
		// (a few dozen of these answers): the server then waits on
		// this stream, whose sender blocks too, until the test ends.
		// Five always fit in the first window.
		sent := make(chan struct{}, 64)
		go func() {
			for s.Send(msg) == nil {
				select {
				case sent <- struct{}{}:
				default:
				}
			}
		}()
		for range 5 {
			<-sent
		}
		other := client(t, cc, rlqs.ClientOptions{Domain: "mix", Now: clock.Now})
		other.Allow(map[string]string{"internal": "o"})
		syncAll(t, other)
		if s := other.Assignment(map[string]string{"internal": "o"}); rlqs.Rate(s) != math.Inf(1) {
			t.Errorf("another stream beside one that never reads: assigned %v, want ALLOW_ALL", s)
		}
	})
}

// Shutdown ends the open streams with UNAVAILABLE, so that a graceful
// stop of the gRPC server need not wait for them.
func TestShutdownEndsStreams(t *testing.T) {
	clock := storetest.NewClock(start)
	srv := &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now}
	cc := serve(t, srv)
	c := client(t, cc, rlqs.ClientOptions{Domain: "mix", Now: clock.Now})
	c.Allow(map[string]string{"internal": "i"})
	syncAll(t, c)
	srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Sync(ctx); status.Code(err) != codes.Unavailable {
		t.Errorf("a report after Shutdown: %v, want UNAVAILABLE", err)
	}
}
