package rlsload

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// counter is a fake rate limit service in memory: every key may be hit
// limit times, ever, and each hit is counted even when denied (as
// envoyproxy/ratelimit does).
type counter struct {
	limit int64
	fail  bool // answer every call with an error

	mu   sync.Mutex
	hits map[string]int64
}

func (c *counter) hit(key string) (over bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hits[key]++
	return c.hits[key] > c.limit
}

func (c *counter) total() (n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.hits {
		n += h
	}
	return n
}

type fakeRLS struct {
	rlspb.UnimplementedRateLimitServiceServer
	*counter
}

func (f fakeRLS) ShouldRateLimit(_ context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	if f.fail {
		return nil, status.Error(codes.Unavailable, "down")
	}
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}
	for _, d := range req.Descriptors {
		st := &rlspb.RateLimitResponse_DescriptorStatus{
			Code:         rlspb.RateLimitResponse_OK,
			CurrentLimit: &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: uint32(f.limit), Unit: rlspb.RateLimitResponse_RateLimit_SECOND},
		}
		if f.hit(req.Domain + "/" + d.Entries[0].Key + "/" + d.Entries[0].Value) {
			st.Code = rlspb.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	return resp, nil
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

// serve starts a fake server of protocol p on a loopback port and returns
// its address and its counter.
func serve(t *testing.T, p Protocol, limit int64, fail bool) (string, *counter) {
	t.Helper()
	c := &counter{limit: limit, fail: fail, hits: map[string]int64{}}
	s := grpc.NewServer()
	switch p {
	case RLS:
		rlspb.RegisterRateLimitServiceServer(s, fakeRLS{counter: c})
	case Gubernator:
		guber.RegisterV1Server(s, fakeGubernator{counter: c})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String(), c
}

func TestRun(t *testing.T) {
	tests := []struct {
		name        string
		protocol    Protocol
		limit       int64 // the server's, and the Config's
		descriptors int
		keys        int
		spec        Spec
		// want
		allowed, denied, hits int64
		distinct              int
	}{
		{"rls/1", RLS, 1000, 1, 50, Spec{Streams: 4, Calls: 200}, 200, 0, 200, 50},
		{"rls/3", RLS, 1000, 3, 50, Spec{Streams: 4, Calls: 200}, 200, 0, 600, 50},
		{"gubernator/1", Gubernator, 1000, 1, 50, Spec{Streams: 4, Calls: 200}, 200, 0, 200, 50},
		{"gubernator/3", Gubernator, 1000, 3, 50, Spec{Streams: 4, Calls: 200}, 200, 0, 600, 50},
		// One stream walks 10 keys 10 times: each key's first hit passes.
		{"rls/denied", RLS, 1, 1, 10, Spec{Streams: 1, Calls: 100}, 10, 90, 100, 10},
		{"gubernator/denied", Gubernator, 1, 1, 10, Spec{Streams: 1, Calls: 100}, 10, 90, 100, 10},
		// Fewer calls than keys: 3 streams of 2 calls from keys 0, 7919
		// mod 1000 = 919 and 15838 mod 1000 = 838.
		{"rls/few", RLS, 1000, 1, 1000, Spec{Streams: 3, Calls: 6}, 6, 0, 6, 6},
	}
	for _, tt := range tests {
		for _, client := range []Client{Lean, GRPC} {
			t.Run(tt.name+"/"+client.String(), func(t *testing.T) {
				addr, c := serve(t, tt.protocol, tt.limit, false)
				l, err := New(Config{Addr: addr, Protocol: tt.protocol, Client: client, Conns: 2, Keys: tt.keys, Descriptors: tt.descriptors, Limit: tt.limit})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				r, err := l.Run(context.Background(), tt.spec)
				if err != nil {
					t.Fatalf("Run: %v (%v)", err, r)
				}
				if r.Calls != tt.spec.Calls || r.Allowed != tt.allowed || r.Denied != tt.denied || r.Failed != 0 || r.Keys != tt.distinct {
					t.Errorf("got %d calls, %d allowed, %d denied, %d failed, %d keys; want %d, %d, %d, 0, %d",
						r.Calls, r.Allowed, r.Denied, r.Failed, r.Keys, tt.spec.Calls, tt.allowed, tt.denied, tt.distinct)
				}
				if got := c.total(); got != tt.hits {
					t.Errorf("server counted %d hits, want %d", got, tt.hits)
				}
				if r.P50 <= 0 || r.P50 > r.P99 || r.P99 > r.P999 || r.P999 > r.Max || r.PerSecond() <= 0 {
					t.Errorf("got p50 %v, p99 %v, p99.9 %v, max %v, %f calls/s; want 0 < p50 ≤ p99 ≤ p99.9 ≤ max, calls/s > 0",
						r.P50, r.P99, r.P999, r.Max, r.PerSecond())
				}
			})
		}
	}
}

func TestRunDuration(t *testing.T) {
	addr, _ := serve(t, RLS, 1<<30, false)
	l, err := New(Config{Addr: addr, Keys: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := l.Run(context.Background(), Spec{Streams: 2, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Calls == 0 || r.Allowed != r.Calls || r.Elapsed < 100*time.Millisecond {
		t.Errorf("got %v, want calls, all allowed, in at least 100ms", r)
	}
}

func TestRunFailures(t *testing.T) {
	for _, client := range []Client{Lean, GRPC} {
		t.Run(client.String(), func(t *testing.T) { testRunFailures(t, client) })
	}
}

func testRunFailures(t *testing.T, client Client) {
	t.Run("down", func(t *testing.T) {
		addr, _ := serve(t, RLS, 1000, true)
		l, err := New(Config{Addr: addr, Client: client})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		r, err := l.Run(context.Background(), Spec{Streams: 2, Calls: 10})
		if err == nil || !strings.Contains(err.Error(), "all 10 calls failed") || status.Code(errors.Unwrap(err)) != codes.Unavailable {
			t.Errorf("Run: got %v, want all 10 calls failed with Unavailable", err)
		}
		if r.Failed != 10 {
			t.Errorf("got %d failed, want 10", r.Failed)
		}
	})
	t.Run("wrong limit", func(t *testing.T) {
		addr, _ := serve(t, RLS, 1000, false)
		l, err := New(Config{Addr: addr, Client: client, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		r, err := l.Run(context.Background(), Spec{Calls: 3})
		if err == nil || r.Failed != 3 || !strings.Contains(r.FirstErr.Error(), "current limit is 1000 requests per unit, want 5") {
			t.Errorf("Run: got %v, %v; want every call failed on the limit", r, err)
		}
	})
}
