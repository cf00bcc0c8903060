//go:build gubernator

package rlsload

import (
	"context"
	"fmt"
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

// TestGubernatorGlobal: every request sent carries behaviour GLOBAL with
// Config.Global, and gubernator's default (BATCHING) without.
func TestGubernatorGlobal(t *testing.T) {
	for _, tt := range []struct {
		global bool
		want   guber.Behavior
	}{{false, guber.Behavior_BATCHING}, {true, guber.Behavior_GLOBAL}} {
		t.Run(fmt.Sprint("global=", tt.global), func(t *testing.T) {
			cfg := Config{Addr: "x", Protocol: Gubernator, Keys: 10, Descriptors: 3, Limit: 5, Global: tt.global}
			if err := cfg.setDefaults(); err != nil {
				t.Fatal(err)
			}
			w := newGubernator(&cfg)
			for k, b := range w.wire {
				var req guber.GetRateLimitsReq
				if err := proto.Unmarshal(b[5:], &req); err != nil {
					t.Fatal(err)
				}
				for _, r := range req.GetRequests() {
					if r.GetBehavior() != tt.want {
						t.Fatalf("request %d: got behaviour %v, want %v", k, r.GetBehavior(), tt.want)
					}
				}
			}
		})
	}
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
