package rlsload

import (
	"context"
	"fmt"

	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/grpc"
)

// gubernatorCaller calls GetRateLimits with one RateLimitReq per key:
// reqs[k] checks keys k, k+1, ... (mod Keys), each a token bucket of
// Limit per Period named Domain_DescriptorKey.
type gubernatorCaller struct {
	client guber.V1Client
	reqs   []*guber.GetRateLimitsReq
	limit  int64
}

func newGubernator(cfg *Config) func(*grpc.ClientConn) caller {
	name := cfg.Domain + "_" + cfg.DescriptorKey
	one := make([]*guber.RateLimitReq, cfg.Keys)
	for k := range one {
		one[k] = &guber.RateLimitReq{
			Name:      name,
			UniqueKey: cfg.value(k),
			Hits:      1,
			Limit:     cfg.Limit,
			Duration:  cfg.Period.Milliseconds(),
			Algorithm: guber.Algorithm_TOKEN_BUCKET,
		}
	}
	reqs := make([]*guber.GetRateLimitsReq, cfg.Keys)
	for k := range reqs {
		r := &guber.GetRateLimitsReq{}
		for j := range cfg.Descriptors {
			r.Requests = append(r.Requests, one[(k+j)%cfg.Keys])
		}
		reqs[k] = r
	}
	return func(cc *grpc.ClientConn) caller {
		return &gubernatorCaller{client: guber.NewV1Client(cc), reqs: reqs, limit: cfg.Limit}
	}
}

func (c *gubernatorCaller) call(ctx context.Context, k int) (outcome, error) {
	req := c.reqs[k]
	resp, err := c.client.GetRateLimits(ctx, req)
	if err != nil {
		return failed, err
	}
	if got, want := len(resp.GetResponses()), len(req.Requests); got != want {
		return failed, fmt.Errorf("rlsload: %d rate limit responses, want %d", got, want)
	}
	o := allowed
	for _, r := range resp.GetResponses() {
		switch {
		case r.GetError() != "":
			return failed, fmt.Errorf("rlsload: gubernator: %s", r.GetError())
		case r.GetLimit() != c.limit:
			return failed, fmt.Errorf("rlsload: limit %d in the answer, want %d", r.GetLimit(), c.limit)
		case r.GetStatus() == guber.Status_OVER_LIMIT:
			o = denied
		}
	}
	return o, nil
}
