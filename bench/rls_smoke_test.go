package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bouncerhq/bouncer/bench/refsvc"
)

// TestRLSReferences checks that the reference services run as the
// benchmarks assume: envoyproxy/ratelimit on Redis and gubernator, each
// holding one key to 3 a minute, answer five calls OK, OK, OK, OVER_LIMIT,
// OVER_LIMIT with 2, 1, 0, 0, 0 remaining, and so does each node of a
// gubernator cluster of three. It needs BOUNCER_REDIS_ADDR,
// like the Redis tests (see redisAddrs), and for gubernator a build with
// -tags gubernator. Each run uses a domain and key of its own, so that no
// earlier run's counter is seen.
func TestRLSReferences(t *testing.T) {
	addrs := redisAddrs(t, redisTopologies[0])
	t.Run("envoy-ratelimit", func(t *testing.T) {
		domain := "smoke-" + runID
		s := startRLS(t, refsvc.EnvoyRatelimit{RedisAddrs: addrs, Config: refsvc.LimitConfig(domain, "user_id", 3, "minute")}.Start)
		checkSmoke(t, func(value string) ([]smokeAnswer, error) {
			return rlsSmokeCalls(context.Background(), s.Addr, domain, value)
		})
	})
	t.Run("gubernator", func(t *testing.T) {
		if testing.Short() {
			t.Skip("installing gubernator takes minutes on a fresh machine; only the benchmarks need it")
		}
		s := startRLS(t, refsvc.Gubernator{}.Start) // skips without -tags gubernator
		checkSmoke(t, func(value string) ([]smokeAnswer, error) {
			return gubernatorSmokeCalls(context.Background(), s.Addr, "smoke_user_id", value)
		})
	})
	// Three nodes, each asked in turn: a key's calls go to its owner,
	// whichever node they reach, so the answers are those of one node.
	t.Run("gubernator-cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("installing gubernator takes minutes on a fresh machine; only the benchmarks need it")
		}
		nodes := startGubernatorCluster(t, 3) // skips without -tags gubernator
		for _, s := range nodes {
			checkSmoke(t, func(value string) ([]smokeAnswer, error) {
				return gubernatorSmokeCalls(context.Background(), s.Addr, "smoke_user_id", value+"-"+s.Addr)
			})
		}
	})
}

// smokeAnswer is one call's answer in TestRLSReferences.
type smokeAnswer struct {
	over      bool
	limit     int64
	remaining int64
}

func (a smokeAnswer) String() string {
	code := "OK"
	if a.over {
		code = "OVER_LIMIT"
	}
	return fmt.Sprintf("%s limit=%d remaining=%d", code, a.limit, a.remaining)
}

// checkSmoke makes five calls of one fresh key with calls and checks the
// answers. envoyproxy/ratelimit's windows start on the minute, so five
// calls that straddle one are made again with another key.
func checkSmoke(t *testing.T, calls func(value string) ([]smokeAnswer, error)) {
	t.Helper()
	want := []smokeAnswer{{false, 3, 2}, {false, 3, 1}, {false, 3, 0}, {true, 3, 0}, {true, 3, 0}}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		got, err := calls(fmt.Sprintf("u-%s-%d", runID, attempt))
		if err != nil {
			t.Fatal(err)
		}
		if start.Unix()/60 != time.Now().Unix()/60 && attempt == 0 {
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("got %v, want %v", got, want)
		}
		return
	}
}

// rlsSmokeCalls makes five ShouldRateLimit calls for descriptor
// [{user_id: value}] in domain, with go-control-plane's client.
func rlsSmokeCalls(ctx context.Context, addr, domain, value string) ([]smokeAnswer, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	client := rlspb.NewRateLimitServiceClient(cc)
	req := &rlspb.RateLimitRequest{
		Domain: domain,
		Descriptors: []*commonrl.RateLimitDescriptor{{
			Entries: []*commonrl.RateLimitDescriptor_Entry{{Key: "user_id", Value: value}},
		}},
	}
	var got []smokeAnswer
	for range 5 {
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			return nil, err
		}
		if len(resp.Statuses) != 1 {
			return nil, fmt.Errorf("%d descriptor statuses in %v, want 1", len(resp.Statuses), resp)
		}
		st := resp.Statuses[0]
		if st.Code != resp.OverallCode {
			return nil, fmt.Errorf("descriptor code %v, overall %v, want the same", st.Code, resp.OverallCode)
		}
		if u := st.GetCurrentLimit().GetUnit(); u != rlspb.RateLimitResponse_RateLimit_MINUTE {
			return nil, fmt.Errorf("limit unit %v, want MINUTE", u)
		}
		got = append(got, smokeAnswer{
			over:      resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT,
			limit:     int64(st.GetCurrentLimit().GetRequestsPerUnit()),
			remaining: int64(st.LimitRemaining),
		})
	}
	return got, nil
}

// gubernatorSmokeCalls makes five GetRateLimits calls for key name_value,
// a token bucket of 3 a minute. It is nil unless the test is built with
// -tags gubernator (rls_smoke_gubernator_test.go sets it); without,
// refsvc.Gubernator.Start fails first, and the subtest skips.
var gubernatorSmokeCalls func(ctx context.Context, addr, name, value string) ([]smokeAnswer, error)
