package rlsload

import (
	"fmt"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
)

// newRLS returns the ShouldRateLimit calls of cfg: reqs[k] checks
// descriptors [{DescriptorKey: value(k)}], [{DescriptorKey:
// value(k+1)}], ... (mod Keys) of Domain. An answer must carry one
// status per descriptor and, if cfg.Limit is set, that limit as each
// descriptor's current one.
func newRLS(cfg *Config) *workload {
	descs := make([]*commonrl.RateLimitDescriptor, cfg.Keys)
	for k := range descs {
		descs[k] = &commonrl.RateLimitDescriptor{Entries: []*commonrl.RateLimitDescriptor_Entry{
			{Key: cfg.DescriptorKey, Value: cfg.value(k)},
		}}
	}
	reqs := make([]proto.Message, cfg.Keys)
	for k := range reqs {
		r := &rlspb.RateLimitRequest{Domain: cfg.Domain}
		for j := range cfg.Descriptors {
			r.Descriptors = append(r.Descriptors, descs[(k+j)%cfg.Keys])
		}
		reqs[k] = r
	}
	w := &workload{
		method:  rlspb.RateLimitService_ShouldRateLimit_FullMethodName,
		reqs:    reqs,
		newResp: func() proto.Message { return new(rlspb.RateLimitResponse) },
	}
	limit, n := cfg.Limit, cfg.Descriptors
	w.judge = func(_ int, m proto.Message) (outcome, error) {
		resp := m.(*rlspb.RateLimitResponse)
		if got := len(resp.GetStatuses()); got != n {
			return failed, fmt.Errorf("rlsload: %d descriptor statuses, want %d", got, n)
		}
		if limit > 0 {
			for _, st := range resp.GetStatuses() {
				if got := st.GetCurrentLimit().GetRequestsPerUnit(); int64(got) != limit {
					return failed, fmt.Errorf("rlsload: descriptor's current limit is %d requests per unit, want %d", got, limit)
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
	w.judgeWire = func(_ int, b []byte) (outcome, error) { return judgeRLSWire(b, n, limit) }
	w.marshal()
	return w
}
