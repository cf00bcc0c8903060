package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer/rlqs"
)

// bouncer serve answers RLQS streams on its gRPC listener from the same
// config as RLS, counting what RLQS clients report where RLS counts, and
// ends the streams when it shuts down.
func TestServeRLQS(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := rlqs.NewClient(ctx, ts.conn, rlqs.ClientOptions{Domain: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	team := map[string]string{"team": "blue"}
	for range 3 {
		c.Allow(team)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if r := rlqs.Rate(c.Assignment(team)); r != 5.0/3600 {
		t.Errorf("team's assignment: %v a second, want its rule's 5 an hour", r)
	}
	resp, err := ts.rls.ShouldRateLimit(ctx, request("app", desc("team=blue")))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 1 {
		t.Errorf("an RLS check after 3 requests reported over RLQS: %d left, want 1 of 5", got)
	}
	ts.stop()
	if err := c.Sync(ctx); status.Code(err) != codes.Unavailable {
		t.Errorf("a report after shutdown: %v, want UNAVAILABLE", err)
	}
}
