package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/internal/redistest"
)

// sumMetric is the sum of every sample of name in the admin listener's
// /metrics, whatever its labels.
func sumMetric(t *testing.T, admin, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for line := range strings.Lines(string(body)) {
		series, value, ok := cutLast(strings.TrimSpace(line), " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if n, _, _ := strings.Cut(series, "{"); n == name {
			v, _ := strconv.ParseFloat(value, 64)
			sum += v
		}
	}
	return sum
}

// startThreeServes starts three bouncer serve processes of config cfg on
// the Redis at addr, and returns their RLS clients and admin addresses
// once each has connected to Redis.
func startThreeServes(t *testing.T, addr, cfg string) ([]pb.RateLimitServiceClient, []string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var clients []pb.RateLimitServiceClient
	var admins []string
	for range 3 {
		grpcAddr, admin := freeAddr(t), freeAddr(t)
		startServe(t, "--config", dir, "--store", "redis://"+addr, "--grpc-addr", grpcAddr, "--http-addr", "", "--admin-addr", admin)
		clients, admins = append(clients, rlsClient(t, grpcAddr)), append(admins, admin)
	}
	for _, a := range admins {
		deadline := time.Now().Add(30 * time.Second)
		for sumMetric(t, a, "bouncer_redis_connected") != 1 {
			if time.Now().After(deadline) {
				t.Fatal("a process's Redis store has not connected after 30s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return clients, admins
}

// Three bouncer serve processes on one Redis, with a seeded load skewed
// between them: a fixed window in lease mode admits at most its rate, in
// async mode at most its rate and (instances - 1) × AsyncBound more, and
// the processes send Redis far fewer checks than they answer. The
// windows are an hour long; a run during which an hour began is made
// again with other keys.
func TestServeHybridThreeProcesses(t *testing.T) {
	addr := redistest.Addr(t)
	domain := fmt.Sprintf("hybrid-%d-%d", os.Getpid(), time.Now().UnixNano()) // Redis outlives the test
	const rate = 40
	cfg := fmt.Sprintf("domain: %s\nrules:\n  - name: leased\n    match: [{key: user}]\n    mode: lease\n    limits: [{rate: %d, period: 1h, algorithm: fixed_window}]\n"+
		"  - name: synced\n    match: [{key: team}]\n    mode: async\n    limits: [{rate: %d, period: 1h, algorithm: fixed_window}]\n", domain, rate, rate)
	clients, admins := startThreeServes(t, addr, cfg)
	callsBefore := 0.0
	for _, a := range admins {
		callsBefore += sumMetric(t, a, "bouncer_redis_calls_total")
	}
	const checks = 400
	rng := rand.New(rand.NewPCG(42, 7))
	var leased, synced int
	for attempt := 0; ; attempt++ {
		hour := time.Now().Truncate(time.Hour)
		leased, synced = 0, 0
		for range checks {
			i := 0
			switch x := rng.Float64(); {
			case x >= 0.9:
				i = 2
			case x >= 0.6:
				i = 1
			}
			for _, pair := range []string{"user=u", "team=t"} {
				resp, _, err := decide(t.Context(), clients[i], domain, pair+strconv.Itoa(attempt))
				if err != nil {
					t.Fatal(err)
				}
				if resp.OverallCode == pb.RateLimitResponse_OK {
					if pair == "user=u" {
						leased++
					} else {
						synced++
					}
				}
			}
		}
		if time.Now().Truncate(time.Hour).Equal(hour) {
			break
		}
		t.Logf("an hour began during the checks of run %d: again with other keys", attempt)
	}
	l := bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: rate, Period: time.Hour}
	asyncBound := rate + 2*hybrid.AsyncBound(l, hybrid.DefaultSyncInterval)
	if leased > rate || leased == 0 {
		t.Errorf("lease mode admitted %d of %d checks, want 1 to %d", leased, checks, rate)
	}
	if synced > int(asyncBound) || synced < rate {
		t.Errorf("async mode admitted %d of %d checks, want %d to %d", synced, checks, rate, asyncBound)
	}
	calls, leases := -callsBefore, 0.0
	for _, a := range admins {
		calls += sumMetric(t, a, "bouncer_redis_calls_total")
		leases += sumMetric(t, a, "bouncer_hybrid_leases_total")
	}
	if calls*4 > 2*checks || leases == 0 {
		t.Errorf("%d checks made %v Redis calls and %v leases: want far fewer calls than checks", 2*checks, calls, leases)
	}
	t.Logf("lease admitted %d, async %d (bound %d); %v Redis calls for %d checks", leased, synced, asyncBound, calls, 2*checks)
}

// Three bouncer serve processes on one Redis, a hot key in async mode
// offered three times its limit, skewed 70/20/10 between them, for six
// one-second windows: once the processes share what is left by their
// demand (bouncer_hybrid_share_exchanges_total), every window after the
// first two admits the limit and at most a unit a process more (a check
// counted in the window its answer says it resets at the end of). Each admitting
// what its own view allowed, they admitted what the others admitted in a
// sync interval more: 10 % over.
func TestServeAsyncSharesThreeProcesses(t *testing.T) {
	addr := redistest.Addr(t)
	domain := fmt.Sprintf("shares-%d-%d", os.Getpid(), time.Now().UnixNano())
	const rate, windows = 100, 6
	cfg := fmt.Sprintf("domain: %s\nrules:\n  - name: hot\n    match: [{key: team}]\n    mode: async\n    limits: [{rate: %d, period: 1s, algorithm: fixed_window}]\n", domain, rate)
	clients, admins := startThreeServes(t, addr, cfg)
	rng := rand.New(rand.NewPCG(42, 9))
	start := time.Now().Truncate(time.Second).Add(time.Second)
	admitted := make([]int, windows)
	pace := time.NewTicker(time.Second / (3 * rate))
	defer pace.Stop()
	for now := range pace.C {
		if now.Before(start) {
			continue
		}
		i := 0
		switch x := rng.Float64(); {
		case x >= 0.9:
			i = 2
		case x >= 0.7:
			i = 1
		}
		resp, degraded, err := decide(t.Context(), clients[i], domain, "team=t")
		if err != nil {
			t.Fatal(err)
		}
		if degraded {
			t.Fatal("a decision was degraded with Redis healthy")
		}
		if time.Since(start) >= windows*time.Second {
			break
		}
		// The window a check was decided in is the one its answer says
		// resets when: the answer may come back in the next, on a loaded
		// machine.
		end := time.Now()
		if st := resp.GetStatuses(); len(st) == 1 && st[0].GetDurationUntilReset() != nil {
			end = end.Add(st[0].GetDurationUntilReset().AsDuration())
		}
		w := int(end.Sub(start)/time.Second) - 1
		if resp.OverallCode == pb.RateLimitResponse_OK && w >= 0 && w < windows {
			admitted[w]++
		}
	}
	exchanges := 0.0
	for _, a := range admins {
		exchanges += sumMetric(t, a, "bouncer_hybrid_share_exchanges_total")
	}
	if exchanges == 0 {
		t.Error("no process exchanged shares")
	}
	for w := 2; w < windows; w++ {
		if admitted[w] > rate+3+2 {
			t.Errorf("window %d admitted %d, over the limit %d and a unit a process (and 2 across the edges)", w, admitted[w], rate)
		}
	}
	t.Logf("admitted per window %v (limit %d); %v exchanges", admitted, rate, exchanges)
}
