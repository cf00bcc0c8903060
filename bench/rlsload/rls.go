package rlsload

import (
	"context"
	"fmt"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// rlsCaller calls ShouldRateLimit. reqs[k] checks keys k, k+1, ... (mod
// Keys); the requests are shared by every connection's caller (a message
// may be marshalled by many goroutines at once).
type rlsCaller struct {
	client rlspb.RateLimitServiceClient
	reqs   []*rlspb.RateLimitRequest
	limit  int64
}

func newRLS(cfg *Config) func(*grpc.ClientConn) caller {
	descs := make([]*commonrl.RateLimitDescriptor, cfg.Keys)
	for k := range descs {
		descs[k] = &commonrl.RateLimitDescriptor{Entries: []*commonrl.RateLimitDescriptor_Entry{
			{Key: cfg.DescriptorKey, Value: cfg.value(k)},
		}}
	}
	reqs := make([]*rlspb.RateLimitRequest, cfg.Keys)
	for k := range reqs {
		r := &rlspb.RateLimitRequest{Domain: cfg.Domain}
		for j := range cfg.Descriptors {
			r.Descriptors = append(r.Descriptors, descs[(k+j)%cfg.Keys])
		}
		reqs[k] = r
	}
	return func(cc *grpc.ClientConn) caller {
		return &rlsCaller{client: rlspb.NewRateLimitServiceClient(cc), reqs: reqs, limit: cfg.Limit}
	}
}

func (c *rlsCaller) call(ctx context.Context, k int) (outcome, error) {
	req := c.reqs[k]
	resp, err := c.client.ShouldRateLimit(ctx, req)
	if err != nil {
		return failed, err
	}
	if got, want := len(resp.GetStatuses()), len(req.Descriptors); got != want {
		return failed, fmt.Errorf("rlsload: %d descriptor statuses, want %d", got, want)
	}
	if c.limit > 0 {
		for _, st := range resp.GetStatuses() {
			if got := st.GetCurrentLimit().GetRequestsPerUnit(); int64(got) != c.limit {
				return failed, fmt.Errorf("rlsload: descriptor's current limit is %d requests per unit, want %d", got, c.limit)
			}
		}
	}
	switch code := resp.GetOverallCode(); code {
	case rlspb.RateLimitResponse_OK:
		return allowed, nil
	case rlspb.RateLimitResponse_OVER_LIMIT:
		return denied, nil
	default:
		return failed, fmt.Errorf("rlsload: overall code %v", code)
	}
}
