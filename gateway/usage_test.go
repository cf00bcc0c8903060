package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/internal/edgetest"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

const meteredRules = `domain: llm
rules:
  - name: tokens
    match: [{key: x-key}]
    limits: [{name: minute, algorithm: fixed_window, rate: 100, period: 1m}]
`

const meteredGateway = `rules: rules.yaml
listeners: [{addr: "127.0.0.1:0"}]
routes:
  - name: chat
    path_prefix: /chat
    upstreams: [UPSTREAM]
    limits:
      domain: llm
      descriptors: [["header:X-Key"]]
      usage: {estimate: "header:X-Estimate", actual: "header:X-Usage-Tokens"}
  - name: files
    path_prefix: /files
    upstreams: [UPSTREAM]
    limits:
      domain: llm
      descriptors: [["header:X-Key"]]
      usage: {estimate: "10", actual: bytes}
`

// llmUpstream streams a completion in chunks, then reports the tokens it
// used, the request's X-Want, in its trailer X-Usage-Tokens (under
// /files, it sends X-Want bytes instead); it counts the requests it
// serves.
func llmUpstream(served *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		n, _ := strconv.Atoi(r.Header.Get("X-Want"))
		if strings.HasPrefix(r.URL.Path, "/files") {
			io.WriteString(w, strings.Repeat("x", n))
			return
		}
		w.Header().Set("Trailer", "X-Usage-Tokens")
		for range 3 {
			io.WriteString(w, "token ")
			http.NewResponseController(w).Flush()
		}
		w.Header().Set("X-Usage-Tokens", r.Header.Get("X-Want"))
	})
}

func TestRouteUsage(t *testing.T) {
	type step struct {
		path, estimate, want string
		status               int
		used                 int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a small estimate is charged what the upstream reports, past the limit, then refused", []step{
			{"/chat", "1", "80", 200, 80},
			{"/chat", "1", "70", 200, 150},
			{"/chat", "1", "1", 429, 150},
		}},
		{"the unused part is given back", []step{
			{"/chat", "90", "10", 200, 10},
			{"/chat", "", "0", 200, 10}, // no estimate reserves 1, and 0 is used
		}},
		{"an estimate over what is left is refused up front", []step{
			{"/chat", "60", "60", 200, 60},
			{"/chat", "60", "1", 429, 60},
		}},
		{"an estimate that is not a count is the client's fault", []step{
			{"/chat", "lots", "1", 400, 0},
		}},
		{"the bytes relayed", []step{
			{"/files", "", "64", 200, 64},
			{"/files", "", "64", 200, 128},
			{"/files", "", "1", 429, 128},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var served atomic.Int64
			upstream := httptest.NewServer(llmUpstream(&served))
			t.Cleanup(upstream.Close)
			cfg, err := gateway.Parse("gateway.yaml", []byte(strings.ReplaceAll(meteredGateway, "UPSTREAM", upstream.URL)))
			if err != nil {
				t.Fatal(err)
			}
			rc, err := rules.Parse("rules.yaml", []byte(meteredRules))
			if err != nil {
				t.Fatal(err)
			}
			l := &edgetest.Ledger{}
			g, err := gateway.New(cfg, gateway.Options{Engine: rules.NewEngine(rc, l), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			gw := httptest.NewServer(g)
			t.Cleanup(gw.Close)
			var wantServed int64
			for i, s := range tc.steps {
				req, _ := http.NewRequest(http.MethodPost, gw.URL+s.path, nil)
				req.Header.Set("X-Key", "k1")
				req.Header.Set("X-Want", s.want)
				if s.estimate != "" {
					req.Header.Set("X-Estimate", s.estimate)
				}
				resp, err := gw.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != s.status {
					t.Fatalf("step %d: status %d, want %d (%s)", i, resp.StatusCode, s.status, body)
				}
				if s.status == 200 {
					wantServed++
					if s.path == "/chat" && resp.Trailer.Get("X-Usage-Tokens") != s.want {
						t.Errorf("step %d: the client's trailer X-Usage-Tokens = %q, want %q", i, resp.Trailer.Get("X-Usage-Tokens"), s.want)
					}
				}
				if served.Load() != wantServed {
					t.Errorf("step %d: the upstream served %d, want %d", i, served.Load(), wantServed)
				}
				if got := l.Sum("minute"); got != s.used {
					t.Errorf("step %d: %d charged, want %d", i, got, s.used)
				}
			}
		})
	}
}

func TestRouteUsageConfig(t *testing.T) {
	for _, tc := range []struct{ usage, want string }{
		{`{estimate: "lots", actual: bytes}`, `estimate: "lots" is none of a count`},
		{`{estimate: "5"}`, "actual: required"},
		{`{actual: "trailer:x"}`, `actual: "trailer:x" is neither`},
		{`{estimate: "1099511627777", actual: bytes}`, "estimate: 1099511627777 is over 1099511627776"},
		{`{actual: "header:X-Usage", drain_timeout: -1s}`, "usage.drain_timeout: -1s is negative"},
		{`{actual: "header:X-Usage", drain_bytes: -1}`, "usage.drain_bytes: -1 is negative"},
		{`{actual: bytes, drain_bytes: 4096}`, "drain_timeout, drain_bytes: only for actual: header:<Name>"},
		{`{actual: "header:X", tokens: {input: "header:I"}}`, "actual, tokens: one or the other"},
		{`{tokens: {}}`, "tokens: name at least one of input, output and cached"},
		{`{tokens: {output: "trailer:O"}}`, `tokens.output: "trailer:O" is not header:<Name>`},
		{`{actual: bytes, model: "query:model"}`, `model: "query:model" is none of header:<Name>, body:<field> and answer:<Name>`},
	} {
		y := strings.Replace(strings.ReplaceAll(meteredGateway, "UPSTREAM", "http://127.0.0.1:1"), `{estimate: "header:X-Estimate", actual: "header:X-Usage-Tokens"}`, tc.usage, 1)
		_, err := gateway.Parse("gateway.yaml", []byte(y))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "gateway.yaml:10") {
			t.Errorf("usage %s: err = %v, want one at gateway.yaml:10 saying %q", tc.usage, err, tc.want)
		}
	}
}

var _ store.Charger = (*edgetest.Ledger)(nil)

// On the memory store, behind the gateway: a client that states an
// estimate of 1 and streams a completion of 150 tokens goes into debt,
// is refused without reaching the upstream, and comes back once time
// has paid the debt.
func TestRouteUsageDebtOnTheStore(t *testing.T) {
	var served atomic.Int64
	upstream := httptest.NewServer(llmUpstream(&served))
	t.Cleanup(upstream.Close)
	cfg, err := gateway.Parse("gateway.yaml", []byte(strings.ReplaceAll(meteredGateway, "UPSTREAM", upstream.URL)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rules.Parse("rules.yaml", []byte(strings.Replace(meteredRules, "algorithm: fixed_window", "algorithm: token_bucket, burst: 100", 1)))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	gw := httptest.NewServer(newGateway(t, cfg, rc, clock.Now))
	t.Cleanup(gw.Close)
	for i, s := range []struct {
		advance time.Duration
		want    string
		status  int
	}{
		{0, "150", 200},
		{0, "1", 429},
		{30 * time.Second, "1", 429},
		{time.Second, "1", 200},
	} {
		clock.Advance(s.advance)
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/chat", nil)
		req.Header.Set("X-Key", "k1")
		req.Header.Set("X-Estimate", "1")
		req.Header.Set("X-Want", s.want)
		resp, err := gw.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.status {
			t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, s.status)
		}
	}
	if served.Load() != 2 {
		t.Errorf("the upstream served %d, want 2", served.Load())
	}
}

// A gRPC upstream that reports the usage of each call in its trailer:
// proxied through the gateway, the call is settled at the trailer's
// count once the call ends.
func TestRouteUsageGRPCTrailer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	usage := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		grpc.SetTrailer(ctx, metadata.Pairs("x-usage-tokens", "150"))
		return resp, err
	}
	up := grpc.NewServer(grpc.UnaryInterceptor(usage))
	healthpb.RegisterHealthServer(up, health.NewServer())
	go up.Serve(lis)
	defer up.Stop()
	cfg, err := gateway.Parse("g.yaml", []byte(`rules: r.yaml
listeners: [{addr: "127.0.0.1:0"}]
routes:
  - name: health
    path_prefix: /grpc.health.v1.Health/
    upstreams: [h2c://`+lis.Addr().String()+`]
    limits:
      domain: llm
      descriptors: [[route]]
      usage: {estimate: "1", actual: "header:X-Usage-Tokens"}
`))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rules.Parse("r.yaml", []byte("domain: llm\nrules:\n  - name: tokens\n    match: [{key: route}]\n    limits: [{name: hourly, rate: 100, period: 1h, burst: 100, algorithm: token_bucket}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	srv := httptest.NewUnstartedServer(newGateway(t, cfg, rc, clock.Now))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	cc, err := grpc.NewClient(strings.TrimPrefix(srv.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, s := range []struct {
		advance time.Duration
		code    codes.Code
	}{
		{0, codes.OK},                               // 150 used of 100: a debt of 50
		{0, codes.ResourceExhausted},                // refused while in debt
		{30 * time.Minute, codes.ResourceExhausted}, // the debt paid, no token yet
		{time.Minute, codes.OK},
	} {
		clock.Advance(s.advance)
		var tr metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
		if status.Code(err) != s.code {
			t.Fatalf("call %d: %v, want %v", i, err, s.code)
		}
		if s.code == codes.OK && len(tr.Get("x-usage-tokens")) != 1 {
			t.Errorf("call %d: trailer %v, want the upstream's x-usage-tokens passed on", i, tr)
		}
	}
}
