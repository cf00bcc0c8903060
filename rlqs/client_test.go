package rlqs_test

import (
	"context"
	"math"
	"testing"
	"time"

	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/storetest"
)

var (
	denyAll   = &typepb.RateLimitStrategy{Strategy: &typepb.RateLimitStrategy_BlanketRule_{BlanketRule: typepb.RateLimitStrategy_DENY_ALL}}
	onePerSec = &typepb.RateLimitStrategy{Strategy: &typepb.RateLimitStrategy_TokenBucket{TokenBucket: &typepb.TokenBucket{
		MaxTokens: 1, TokensPerFill: wrapperspb.UInt32(1), FillInterval: durationpb.New(time.Second),
	}}}
)

// allowed counts how many of n requests of id c admits at once.
func allowed(c *rlqs.Client, id map[string]string, n int) int {
	k := 0
	for range n {
		if c.Allow(id) {
			k++
		}
	}
	return k
}

// The client decides as Envoy's filter does: by no_assignment_behavior
// until the first assignment, then by the assigned token bucket (full at
// first, refilled at its rate), and once the assignment's TTL is over by
// expired_assignment_behavior (a fallback, or the last assignment), or
// else by no_assignment_behavior again.
func TestClientBehaviour(t *testing.T) {
	get := map[string]string{"tenant": "a", "method": "GET"} // 600 a minute: 10 a second, 10 at once
	for _, tt := range []struct {
		name    string
		o       rlqs.ClientOptions
		expired int // of 20 at once, after the TTL
	}{
		{"expired falls back to no assignment", rlqs.ClientOptions{NoAssignment: denyAll}, 0},
		{"expired falls back to a token bucket", rlqs.ClientOptions{NoAssignment: denyAll, Expired: onePerSec}, 1},
		{"expired reuses the last assignment", rlqs.ClientOptions{NoAssignment: denyAll, ReuseLastAssignment: true}, 10},
		{"no assignment allows all by default", rlqs.ClientOptions{}, 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := storetest.NewClock(start)
			srv := &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now}
			cc := serve(t, srv)
			tt.o.Domain, tt.o.Now = "mix", clock.Now
			c := client(t, cc, tt.o)
			want := 0
			if tt.o.NoAssignment == nil {
				want = 3
			}
			if n := allowed(c, get, 3); n != want {
				t.Errorf("before an assignment: %d of 3 allowed, want %d", n, want)
			}
			syncAll(t, c)
			if n := allowed(c, get, 20); n != 10 {
				t.Errorf("a new assignment of 10 a second: %d of 20 at once allowed, want 10", n)
			}
			clock.Advance(300 * time.Millisecond)
			if n := allowed(c, get, 20); n != 3 {
				t.Errorf("300 ms later: %d of 20 allowed, want 3", n)
			}
			clock.Advance(srv.TTL())
			if n := allowed(c, get, 20); n != tt.expired {
				t.Errorf("after the TTL: %d of 20 allowed, want %d", n, tt.expired)
			}
		})
	}
}

// An abandoned bucket goes back to no_assignment_behavior.
func TestClientAbandoned(t *testing.T) {
	clock := storetest.NewClock(start)
	cc := serve(t, &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now})
	c := client(t, cc, rlqs.ClientOptions{Domain: "mix", Now: clock.Now, NoAssignment: denyAll})
	none := map[string]string{"nothing": "here"}
	c.Allow(none)
	syncAll(t, c)
	if s := c.Assignment(none); s != nil {
		t.Fatalf("a bucket no rule matches: %v, want abandoned", s)
	}
	if c.Allow(none) {
		t.Error("an abandoned bucket's request passed; want no_assignment_behavior (DENY_ALL)")
	}
}

// Run reports at a bucket's first request, without waiting for the
// interval, and every interval after.
func TestClientRun(t *testing.T) {
	clock := storetest.NewClock(start)
	cc := serve(t, &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now})
	c := client(t, cc, rlqs.ClientOptions{Domain: "mix", Now: clock.Now, Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	id := map[string]string{"internal": "r"}
	c.Allow(id)
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := c.WaitAnswers(wait, 1); err != nil {
		t.Fatalf("no answer to the first request's report: %v", err)
	}
	if s := c.Assignment(id); rlqs.Rate(s) != math.Inf(1) {
		t.Errorf("after the first request's report: %v, want ALLOW_ALL", s)
	}
}
