package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/bouncerhq/bouncer/redisstore"
)

// rlsClient dials a serve process's gRPC listener.
func rlsClient(t *testing.T, addr string) pb.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

// decide asks one descriptor of domain, and returns the answer and
// whether it was marked degraded (the bouncer-degraded metadata entry).
func decide(ctx context.Context, c pb.RateLimitServiceClient, domain string, pairs ...string) (*pb.RateLimitResponse, bool, error) {
	var md metadata.MD
	resp, err := c.ShouldRateLimit(ctx, request(domain, desc(pairs...)), grpc.Header(&md), grpc.WaitForReady(true))
	return resp, len(md.Get("bouncer-degraded")) > 0 && md.Get("bouncer-degraded")[0] == "true", err
}

// readyz returns the admin listener's readiness answer.
func readyz(t *testing.T, admin string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("/readyz: %v in %q", err, body)
	}
	return resp.StatusCode, out
}

const holdDownConfig = `domain: down
rules:
  - name: per_user
    match: [{key: user}]
    limits: [{rate: 2, period: 1h, algorithm: fixed_window}]
`

// bouncer serve, with default flags, starts while its Redis is down:
// it answers by policy at once (local by default: the limit holds per
// instance), says so in every answer and in /readyz, and decides in
// Redis within a second of Redis coming up (beyond the machine's stalls).
func TestServeStartsWithRedisDown(t *testing.T) {
	requireRedisServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "down.yaml"), []byte(holdDownConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t) // nothing listens there yet
	grpcAddr, admin := freeAddr(t), freeAddr(t)
	p := startServe(t, "--config", dir, "--store", fmt.Sprintf("redis://127.0.0.1:%d", port),
		"--grpc-addr", grpcAddr, "--http-addr", "", "--admin-addr", admin)
	c := rlsClient(t, grpcAddr)
	ctx := t.Context()

	// Down: the local limit of 2 an hour, marked degraded. Its windows
	// are the clock's hours: checks during which an hour began are asked
	// again, for another user.
	type answer struct {
		code     pb.RateLimitResponse_Code
		degraded bool
	}
	var got []answer
	for user := 0; ; user++ {
		hour := time.Now().Truncate(time.Hour)
		got = got[:0]
		for range 3 {
			resp, degraded, err := decide(ctx, c, "down", fmt.Sprintf("user=a%d", user))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, answer{resp.OverallCode, degraded})
		}
		if time.Now().Truncate(time.Hour).Equal(hour) {
			break
		}
		t.Logf("an hour began during the checks for a%d: again for a%d", user, user+1)
	}
	for i, a := range got {
		want := pb.RateLimitResponse_OK
		if i == 2 {
			want = pb.RateLimitResponse_OVER_LIMIT
		}
		if a.code != want || !a.degraded {
			t.Fatalf("check %d with Redis down: %v, degraded %v; want %v, degraded\n%s", i+1, a.code, a.degraded, want, p.output())
		}
	}
	code, body := readyz(t, admin)
	reasons, _ := body["reasons"].([]any)
	if code != http.StatusOK || body["status"] != "degraded" || len(reasons) == 0 || !strings.Contains(fmt.Sprint(reasons), "connection refused") {
		t.Fatalf("/readyz with Redis down: %d %v; want 200, degraded, and why", code, body)
	}
	if resp, err := http.Get("http://" + admin + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz with Redis down: %v %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	// Up: Redis decides once the store's next attempt to connect succeeds
	// (they are at most half a second apart): within a second, beyond the
	// time the machine stalled this process meanwhile. With Redis down a
	// check is answered without a call to it, so a check slower than the
	// store's deadline is a stall, and a stall holds the store's attempt
	// to connect as it holds the checks.
	startRedisProc(t, port)
	up := time.Now()
	var stalled time.Duration
	for {
		start := time.Now()
		resp, degraded, err := decide(ctx, c, "down", "user=b")
		if took := time.Since(start); took > redisstore.DefaultTimeout {
			stalled += took
		}
		if err != nil {
			t.Fatal(err)
		}
		if !degraded {
			if resp.OverallCode != pb.RateLimitResponse_OK {
				t.Fatalf("first check decided in Redis: %v, want OK", resp.OverallCode)
			}
			break
		}
		if time.Since(up) > time.Second+stalled {
			t.Fatalf("still degraded %v after Redis came up, of which checks stalled %v\n%s", time.Since(up), stalled, p.output())
		}
	}
	t.Logf("decided in Redis %v after Redis came up (checks stalled %v)", time.Since(up).Round(time.Millisecond), stalled.Round(time.Millisecond))
	if code, body := readyz(t, admin); code != http.StatusOK || body["status"] != "ready" {
		t.Fatalf("/readyz with Redis up: %d %v; want 200 ready", code, body)
	}
	for _, want := range []string{"redis unreachable", "redis connected"} {
		if !strings.Contains(p.output(), want) {
			t.Errorf("log does not say %q:\n%s", want, p.output())
		}
	}
}
