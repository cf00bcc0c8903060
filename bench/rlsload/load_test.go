package rlsload

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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

// testProtocol is what the tests need of a protocol besides its workload.
type testProtocol struct {
	// register registers on s a fake server of the protocol, counting
	// in c.
	register func(s *grpc.Server, c *counter)
	// random returns an answer for about n keys, mostly as the judges
	// want, with fields they do not read set too.
	random func(rng *rand.Rand, n int) proto.Message
}

// testProtocols are the protocols the tests can run: gubernator's only
// in a build with -tags gubernator (gubernator_test.go adds it).
var testProtocols = map[Protocol]testProtocol{
	RLS: {
		register: func(s *grpc.Server, c *counter) { rlspb.RegisterRateLimitServiceServer(s, fakeRLS{counter: c}) },
		random:   randomRLS,
	},
}

// needProtocol returns what the tests need of p, and skips t in a build
// that does not speak p.
func needProtocol(t *testing.T, p Protocol) testProtocol {
	t.Helper()
	tp, ok := testProtocols[p]
	if !ok {
		t.Skipf("%v: built without -tags gubernator", p)
	}
	return tp
}

// serve starts a fake server of protocol p on a loopback port and returns
// its address and its counter. It skips t in a build that does not speak
// p.
func serve(t *testing.T, p Protocol, limit int64, fail bool) (string, *counter) {
	t.Helper()
	register := needProtocol(t, p).register
	c := &counter{limit: limit, fail: fail, hits: map[string]int64{}}
	s := grpc.NewServer()
	register(s, c)
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

// TestGubernatorNotBuilt: a build without -tags gubernator refuses
// gubernator's protocol, saying why.
func TestGubernatorNotBuilt(t *testing.T) {
	if workloads[Gubernator] != nil {
		t.Skip("built with -tags gubernator")
	}
	_, err := New(Config{Addr: "127.0.0.1:1", Protocol: Gubernator, Limit: 1})
	if want := "rlsload: gubernator: built without -tags gubernator"; err == nil || err.Error() != want {
		t.Errorf("New: got %v, want %s", err, want)
	}
}

// TestRunAddrs: with Addrs, the streams share the calls out among the
// addresses round-robin, whatever the client.
func TestRunAddrs(t *testing.T) {
	for _, client := range []Client{Lean, GRPC} {
		t.Run(client.String(), func(t *testing.T) {
			var addrs []string
			var counters []*counter
			for range 3 {
				addr, c := serve(t, RLS, 1000, false)
				addrs = append(addrs, addr)
				counters = append(counters, c)
			}
			l, err := New(Config{Addrs: addrs, Client: client, Conns: 2, Keys: 50})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			// 6 streams of 100 calls: streams i and i+3 call addrs[i].
			r, err := l.Run(context.Background(), Spec{Streams: 6, Calls: 600})
			if err != nil || r.Allowed != 600 {
				t.Fatalf("Run: got %v, %v; want 600 calls allowed", r, err)
			}
			for i, c := range counters {
				if got := c.total(); got != 200 {
					t.Errorf("server %d counted %d hits, want 200", i, got)
				}
			}
		})
	}
}

// TestConfigInvalid: New refuses a Config that says nothing or says
// something twice, naming the field.
func TestConfigInvalid(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no address", Config{}, "rlsload: Config.Addr is required"},
		{"both addresses", Config{Addr: "127.0.0.1:1", Addrs: []string{"127.0.0.1:2"}}, "rlsload: Config.Addr and Config.Addrs both set"},
		{"empty address", Config{Addrs: []string{"127.0.0.1:1", ""}}, "rlsload: empty address in Config.Addrs"},
		{"global with rls", Config{Addr: "127.0.0.1:1", Global: true}, "rlsload: Config.Global with rls; only gubernator has it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.cfg)
			if err == nil {
				l.Close()
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("New: got %v, want %s", err, tt.want)
			}
		})
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
