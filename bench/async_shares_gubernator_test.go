//go:build gubernator

package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bouncerhq/bouncer"
)

func init() { sharesGubernator = gubernatorShares }

// gubernatorShares is sharesGubernator in a build with -tags gubernator:
// one connection to each node, and each check one GetRateLimits call of
// one request, gubernatorLimit(l, prefix:key), allowed unless its status
// is OVER_LIMIT.
func gubernatorShares(addrs []string, prefix string, l bouncer.Limit) (sharesChecker, func(), error) {
	if _, err := gubernatorLimit(l, ""); err != nil {
		return nil, nil, err
	}
	var conns []*grpc.ClientConn
	closeConns := func() {
		for _, cc := range conns {
			cc.Close()
		}
	}
	var clients []guber.V1Client
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			closeConns()
			return nil, nil, err
		}
		conns = append(conns, cc)
		clients = append(clients, guber.NewV1Client(cc))
	}
	check := func(ctx context.Context, i int, key string) (bool, bool, error) {
		r, _ := gubernatorLimit(l, prefix+":"+key)
		resp, err := clients[i].GetRateLimits(ctx, &guber.GetRateLimitsReq{Requests: []*guber.RateLimitReq{r}})
		if err != nil {
			return false, false, err
		}
		if n := len(resp.GetResponses()); n != 1 {
			return false, false, fmt.Errorf("gubernator: %d responses, want 1", n)
		}
		if e := resp.GetResponses()[0].GetError(); e != "" {
			return false, false, errors.New("gubernator: " + e)
		}
		return resp.GetResponses()[0].GetStatus() != guber.Status_OVER_LIMIT, false, nil
	}
	return check, closeConns, nil
}

// gubernatorLimit is the request of gubernator's closest to l, for key,
// with behaviour GLOBAL and 1 hit:
//
//   - a fixed window of Rate per Period: gubernator's TOKEN_BUCKET of
//     Rate per Period, which holds Rate units from a key's first hit and
//     refills them all at once Period later: a window of Rate that starts
//     at the first hit rather than on the epoch's boundaries;
//   - a token bucket of Rate per Period and Burst: gubernator's
//     LEAKY_BUCKET, which leaks Limit units per Duration continuously,
//     holding at most Burst: the same bucket. (A node that is not the
//     key's owner sets its copy's Burst to Limit, so Burst must equal
//     Rate.)
func gubernatorLimit(l bouncer.Limit, key string) (*guber.RateLimitReq, error) {
	r := &guber.RateLimitReq{
		Name:      "shares",
		UniqueKey: key,
		Hits:      1,
		Limit:     l.Rate,
		Duration:  l.Period.Milliseconds(),
		Behavior:  guber.Behavior_GLOBAL,
	}
	switch {
	case l.Algorithm == bouncer.FixedWindow:
		r.Algorithm = guber.Algorithm_TOKEN_BUCKET
	case l.Algorithm == bouncer.TokenBucket && l.Burst == l.Rate:
		r.Algorithm, r.Burst = guber.Algorithm_LEAKY_BUCKET, l.Burst
	default:
		return nil, fmt.Errorf("gubernator has no limit like %+v", l)
	}
	return r, nil
}

// TestGubernatorLimit checks the gubernator limits BenchmarkAsyncShares
// sets beside async's: the window as gubernator's token bucket of the
// same rate and period, the bucket as its leaky bucket of the same rate,
// period and burst, and nothing for a limit gubernator has no twin of.
func TestGubernatorLimit(t *testing.T) {
	tests := []struct {
		l                      bouncer.Limit
		alg                    guber.Algorithm
		limit, duration, burst int64
	}{
		{sharesLimits[0].l, guber.Algorithm_TOKEN_BUCKET, 300, 2000, 0},
		{sharesLimits[1].l, guber.Algorithm_LEAKY_BUCKET, 150, 1000, 150},
	}
	for _, tt := range tests {
		r, err := gubernatorLimit(tt.l, "k")
		if err != nil {
			t.Fatalf("gubernatorLimit(%v): %v", tt.l.Algorithm, err)
		}
		if r.GetAlgorithm() != tt.alg || r.GetLimit() != tt.limit || r.GetDuration() != tt.duration || r.GetBurst() != tt.burst {
			t.Errorf("gubernatorLimit(%v) = %v %d per %d ms, burst %d; want %v %d per %d ms, burst %d", tt.l.Algorithm,
				r.GetAlgorithm(), r.GetLimit(), r.GetDuration(), r.GetBurst(), tt.alg, tt.limit, tt.duration, tt.burst)
		}
		if r.GetBehavior() != guber.Behavior_GLOBAL || r.GetHits() != 1 || r.GetUniqueKey() != "k" {
			t.Errorf("gubernatorLimit(%v): behaviour %v, %d hits, key %q; want GLOBAL, 1, %q", tt.l.Algorithm, r.GetBehavior(), r.GetHits(), r.GetUniqueKey(), "k")
		}
	}
	for _, l := range []bouncer.Limit{
		{Name: "x", Algorithm: bouncer.GCRA, Rate: 150, Period: time.Second, Burst: 150},
		{Name: "x", Algorithm: bouncer.TokenBucket, Rate: 150, Period: time.Second, Burst: 300},
	} {
		if _, err := gubernatorLimit(l, "k"); err == nil {
			t.Errorf("gubernatorLimit(%v, burst %d): no error, want one", l.Algorithm, l.Burst)
		}
	}
}
