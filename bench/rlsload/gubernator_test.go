//go:build gubernator

package rlsload

import (
	"context"
	"math/rand/v2"
	"testing"

	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func init() {
	testProtocols[Gubernator] = testProtocol{
		register: func(s *grpc.Server, c *counter) { guber.RegisterV1Server(s, fakeGubernator{counter: c}) },
		random:   randomGubernator,
	}
}

func TestGubernatorWireFieldNumbers(t *testing.T) {
	checkFieldNumbers(t, []fieldNumber{
		{&guber.GetRateLimitsResp{}, "responses", guberRespResponses},
		{&guber.RateLimitResp{}, "status", guberRespStatus},
		{&guber.RateLimitResp{}, "limit", guberRespLimit},
		{&guber.RateLimitResp{}, "error", guberRespError},
	})
}

type fakeGubernator struct {
	guber.UnimplementedV1Server
	*counter
}

func (f fakeGubernator) GetRateLimits(_ context.Context, req *guber.GetRateLimitsReq) (*guber.GetRateLimitsResp, error) {
	if f.fail {
		return nil, status.Error(codes.Unavailable, "down")
	}
	resp := &guber.GetRateLimitsResp{}
	for _, r := range req.Requests {
		st := guber.Status_UNDER_LIMIT
		if f.hit(r.Name + "/" + r.UniqueKey) {
			st = guber.Status_OVER_LIMIT
		}
		resp.Responses = append(resp.Responses, &guber.RateLimitResp{Status: st, Limit: f.limit})
	}
	return resp, nil
}

// randomGubernator returns a GetRateLimitsResp of about n responses,
// mostly as the judges want.
func randomGubernator(rng *rand.Rand, n int) proto.Message {
	r := &guber.GetRateLimitsResp{}
	if rng.IntN(4) == 0 {
		n += rng.IntN(3) - 1
	}
	for range n {
		rr := &guber.RateLimitResp{
			Status:    guber.Status(rng.IntN(2)),
			Limit:     5,
			Remaining: rng.Int64N(6),
			ResetTime: rng.Int64(),
			Metadata:  map[string]string{"owner": "127.0.0.1"},
		}
		if rng.IntN(10) == 0 {
			rr.Limit = rng.Int64N(7)
		}
		if rng.IntN(15) == 0 {
			rr.Error = "boom"
		}
		r.Responses = append(r.Responses, rr)
	}
	return r
}
