package rlqs_test

import (
	"context"
	"math"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// A report can't punish: one report of num_requests_allowed 2^63-1 used
// to put the bucket's key at its maximum debt (an RLS check of it was
// refused for 52 days). It is now charged at most the rule's report
// bound: a minute of its rate, so the key is free again within a minute.
func TestReportCannotLockAKeyOut(t *testing.T) {
	const cfg = `
domain: q
rules:
  - name: per_tenant
    match: [{key: tenant}]
    limits:
      - {algorithm: token_bucket, rate: 10, period: 1s}
`
	clock := storetest.NewClock(start)
	e := engine(t, cfg, clock)
	cc := serve(t, &rlqs.Server{Engine: e, Now: clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := pb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(&pb.RateLimitQuotaUsageReports{Domain: "q", BucketQuotaUsages: []*pb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId:           &pb.BucketId{Bucket: map[string]string{"tenant": "victim"}},
		TimeElapsed:        durationpb.New(time.Second),
		NumRequestsAllowed: math.MaxInt64,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	check := func() rules.Response {
		t.Helper()
		resp, err := e.Decide(ctx, rules.Request{Domain: "q", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "tenant", Value: "victim"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// 600 charged to a bucket of 10: 590 owed, so the next unit comes in
	// 59.1 s.
	if r := check(); r.Code != rules.OverLimit || r.Statuses[0].RetryAfter != 59100*time.Millisecond {
		t.Fatalf("after the report: %v, retry after %v; want OVER_LIMIT, 59.1s", r.Code, r.Statuses[0].RetryAfter)
	}
	clock.Advance(time.Minute)
	if r := check(); r.Code != rules.OK {
		t.Errorf("a minute later: %v, want OK", r.Code)
	}
}
