package rlsload

import (
	"fmt"

	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/protobuf/proto"
)

// newGubernator returns the GetRateLimits calls of cfg, with one
// RateLimitReq per key: reqs[k] checks keys k, k+1, ... (mod Keys), each
// a token bucket of Limit per Period named Domain_DescriptorKey. An
// answer must carry one response per key, each without error and with
// Limit as its limit.
func newGubernator(cfg *Config) *workload {
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
	reqs := make([]proto.Message, cfg.Keys)
	for k := range reqs {
		r := &guber.GetRateLimitsReq{}
		for j := range cfg.Descriptors {
			r.Requests = append(r.Requests, one[(k+j)%cfg.Keys])
		}
		reqs[k] = r
	}
	w := &workload{
		method:  guber.V1_GetRateLimits_FullMethodName,
		reqs:    reqs,
		newResp: func() proto.Message { return new(guber.GetRateLimitsResp) },
	}
	limit, n := cfg.Limit, cfg.Descriptors
	w.judge = func(_ int, m proto.Message) (outcome, error) {
		resp := m.(*guber.GetRateLimitsResp)
		if got := len(resp.GetResponses()); got != n {
			return failed, fmt.Errorf("rlsload: %d rate limit responses, want %d", got, n)
		}
		o := allowed
		for _, r := range resp.GetResponses() {
			switch {
			case r.GetError() != "":
				return failed, fmt.Errorf("rlsload: gubernator: %s", r.GetError())
			case r.GetLimit() != limit:
				return failed, fmt.Errorf("rlsload: limit %d in the answer, want %d", r.GetLimit(), limit)
			case r.GetStatus() == guber.Status_OVER_LIMIT:
				o = denied
			}
		}
		return o, nil
	}
	w.judgeWire = func(_ int, b []byte) (outcome, error) { return judgeGubernatorWire(b, n, limit) }
	w.marshal()
	return w
}
