//go:build gubernator

package refsvc

import (
	"context"
	"fmt"

	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func init() { gubernatorHealthy = gubernatorHealthCheck }

// gubernatorHealthCheck is gubernatorHealthy in a build with -tags
// gubernator.
func gubernatorHealthCheck(ctx context.Context, addr string, peers int) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	h, err := guber.NewV1Client(cc).HealthCheck(ctx, &guber.HealthCheckReq{})
	if err != nil {
		return err
	}
	if h.GetStatus() != "healthy" || int(h.GetPeerCount()) < peers {
		return fmt.Errorf("%w: %s %q with %d peers", errNotReady, h.GetStatus(), h.GetMessage(), h.GetPeerCount())
	}
	return nil
}
