package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer/internal/redistest"
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
	_, body := ts.get(t, "/metrics")
	for name, want := range map[string]float64{"bouncer_rlqs_streams": 1, "bouncer_rlqs_buckets": 1, "bouncer_rlqs_bucket_reports_total": 1, "bouncer_rlqs_abandoned_total": 0, "bouncer_rlqs_streams_refused_total": 0} {
		if v, ok := sample(body, name); !ok || v != want {
			t.Errorf("%s: %v (present %v), want %v", name, v, ok, want)
		}
	}
	if v, ok := sample(body, "bouncer_rlqs_id_bytes"); !ok || v == 0 {
		t.Errorf("bouncer_rlqs_id_bytes: %v (present %v), want the bytes of the bucket's id", v, ok)
	}
	for _, bound := range []string{"stream_buckets", "server_buckets", "conn_id_bytes", "server_id_bytes"} {
		if v, ok := sample(body, "bouncer_rlqs_buckets_refused_total", "bound="+bound); !ok || v != 0 {
			t.Errorf("bouncer_rlqs_buckets_refused_total{bound=%q}: %v (present %v), want 0", bound, v, ok)
		}
	}
	ts.stop()
	if err := c.Sync(ctx); status.Code(err) != codes.Unavailable {
		t.Errorf("a report after shutdown: %v, want UNAVAILABLE", err)
	}
}

// Two bouncer serve instances on one Redis, each with a client of the
// same bucket, divide its limit between the two as one allocation: the
// first client gets the whole limit, the second, new in the same report
// interval, what the first leaves (nothing) until the next one, instead
// of a whole limit of its own; and the usage either reports is counted
// once for both.
func TestServeRLQSTwoInstances(t *testing.T) {
	addr := redistest.Addr(t)
	domain := fmt.Sprintf("rlqs-%d-%d", os.Getpid(), time.Now().UnixNano())
	config := strings.Replace(appConfig, "domain: app", "domain: "+domain, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	team := map[string]string{"team": "red"}
	var cs []*rlqs.Client
	var tss []*testService
	for range 2 {
		ts := startTest(t, map[string]string{"app.yaml": config}, func(c *serveConfig) { c.store = "redis://" + addr })
		redisConnected(t, ts)
		c, err := rlqs.NewClient(ctx, ts.conn, rlqs.ClientOptions{Domain: domain})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Allow(team)
		if err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		cs, tss = append(cs, c), append(tss, ts)
	}
	if err := cs[0].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{5.0 / 3600, 0} {
		if r := rlqs.Rate(cs[i].Assignment(team)); r > want || r < want*0.99 {
			t.Errorf("client %d of instance %d: %v a second, want %v", i, i, r, want)
		}
	}
	resp, err := tss[1].rls.ShouldRateLimit(ctx, request(domain, desc("team=red")))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 2 {
		t.Errorf("an RLS check after 2 requests reported over RLQS, one through each instance, and a third: %d left, want 2 of 5", got)
	}
}
