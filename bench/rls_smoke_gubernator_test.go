//go:build gubernator

package bench

import (
	"context"
	"fmt"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func init() { gubernatorSmokeCalls = gubernatorV1SmokeCalls }

// gubernatorV1SmokeCalls makes five GetRateLimits calls for key
// name_value, a token bucket of 3 a minute, with gubernator's V1 client.
func gubernatorV1SmokeCalls(ctx context.Context, addr, name, value string) ([]smokeAnswer, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	client := guber.NewV1Client(cc)
	req := &guber.GetRateLimitsReq{Requests: []*guber.RateLimitReq{{
		Name: name, UniqueKey: value, Hits: 1, Limit: 3, Duration: time.Minute.Milliseconds(),
		Algorithm: guber.Algorithm_TOKEN_BUCKET,
	}}}
	var got []smokeAnswer
	for range 5 {
		resp, err := client.GetRateLimits(ctx, req)
		if err != nil {
			return nil, err
		}
		if len(resp.Responses) != 1 {
			return nil, fmt.Errorf("%d responses in %v, want 1", len(resp.Responses), resp)
		}
		r := resp.Responses[0]
		if r.Error != "" {
			return nil, fmt.Errorf("gubernator: %s", r.Error)
		}
		got = append(got, smokeAnswer{over: r.Status == guber.Status_OVER_LIMIT, limit: r.Limit, remaining: r.Remaining})
	}
	return got, nil
}
