package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/rules"
)

// The configs below count in windows of an hour or more: the
// envoyproxy/ratelimit semantics align windows to the Unix epoch, so a
// shorter one could reset between two steps of a test.

// appConfig has a limit of 2 per hour per user, in both formats.
const appConfig = `domain: app
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: team
    rate_limit: {name: per_team, unit: hour, requests_per_unit: 5}
`

const nativeConfig = `domain: native
rules:
  - name: per_user
    match:
      - key: user
    limits:
      - {name: hourly, rate: 2, period: 1h, algorithm: fixed_window}
`

// envoyConfig is a file in envoyproxy/ratelimit's format using what that
// project offers: nested descriptors, wildcards (shared or not), replaces,
// unlimited, a zero limit, shadow and quota modes, and a descriptor
// without a limit.
const envoyConfig = `# envoyproxy/ratelimit's format
domain: edge
descriptors:
  - key: user_id
    rate_limit:
      unit: hour
      requests_per_unit: 3
  - key: tenant
    value: acme
    rate_limit:
      name: acme
      unit: hour
      requests_per_unit: 5
  - key: tenant
    value: big*
    rate_limit:
      unit: hour
      requests_per_unit: 2
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 2
  - key: source
    value: proxy
    descriptors:
      - key: dest
        rate_limit:
          name: per_dest
          unit: hour
          requests_per_unit: 2
      - key: dest
        value: vip
        rate_limit:
          replaces:
            - name: per_dest
          unit: hour
          requests_per_unit: 4
  - key: internal
    rate_limit:
      unlimited: true
  - key: banned
    rate_limit:
      unit: day
      requests_per_unit: 0
  - key: canary
    shadow_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: quota
    quota_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: whitelisted
`

// testService is a service started for one test, with clients of its
// listeners.
type testService struct {
	*service
	dir  string
	rls  pb.RateLimitServiceClient
	conn *grpc.ClientConn
	web  *http.Client
	logs chan string // the messages the service logs, in order

	stopOnce sync.Once
}

// stop shuts the service down; the test's cleanup calls it too.
func (ts *testService) stop() { ts.stopOnce.Do(ts.shutdown) }

// startTest writes files into a new config directory and serves it on
// loopback ports the system picks, with the in-memory store unless an
// option says otherwise. The service stops when the test ends.
func startTest(t *testing.T, files map[string]string, opts ...func(*serveConfig)) *testService {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		writeConfig(t, dir, name, body)
	}
	c := defaultServeConfig(t)
	c.config = dir
	c.grpcAddr, c.httpAddr, c.adminAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	c.storeTimeout = 5 * time.Second
	c.onStoreError = "allow"
	for _, o := range opts {
		o(&c)
	}
	o, err := c.validate()
	if err != nil {
		t.Fatalf("validate: %v", err)
	}
	logs := make(chan string, 1000) // more than a test logs
	log := slog.New(&tapHandler{Handler: newLogger(t.Output(), c.logFormat, o.level).Handler(), msgs: logs})
	s, err := startService(t.Context(), c, o, log)
	if err != nil {
		t.Fatalf("startService: %v", err)
	}
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.shutdown()
		t.Fatalf("grpc.NewClient: %v", err)
	}
	ts := &testService{
		service: s, dir: dir, conn: conn, logs: logs,
		rls: pb.NewRateLimitServiceClient(conn),
		web: &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second},
	}
	t.Cleanup(func() {
		conn.Close()
		ts.web.CloseIdleConnections()
		ts.stop()
	})
	return ts
}

// tapHandler passes each record on to Handler and its message to msgs,
// so that a test can wait for what the service says it did.
type tapHandler struct {
	slog.Handler
	msgs chan<- string
}

func (h *tapHandler) Handle(ctx context.Context, r slog.Record) error {
	select {
	case h.msgs <- r.Message:
	default: // a test that does not read them
	}
	return h.Handler.Handle(ctx, r)
}

func (h *tapHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &tapHandler{Handler: h.Handler.WithAttrs(as), msgs: h.msgs}
}

func (h *tapHandler) WithGroup(name string) slog.Handler {
	return &tapHandler{Handler: h.Handler.WithGroup(name), msgs: h.msgs}
}

// awaitLog waits, 10s at most, until the service logs msg.
func (ts *testService) awaitLog(t *testing.T, msg string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-ts.logs:
			if m == msg {
				return
			}
		case <-deadline:
			t.Fatalf("the service has not logged %q after 10s", msg)
		}
	}
}

// defaultServeConfig is the configuration `bouncer serve` runs with when
// no flag is given.
func defaultServeConfig(t *testing.T) serveConfig {
	t.Helper()
	var c serveConfig
	if err := serveFlags(&c, io.Discard).Parse(nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// writeConfig writes a config file whole, as an editor or a ConfigMap
// update does: into a dot-file first, which the loader skips, then renamed
// into place.
func writeConfig(t *testing.T, dir, name, body string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// desc builds an RLS descriptor from "key=value" pairs.
func desc(pairs ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d
}

// hits sets a descriptor's own hits_addend.
func hits(d *rlpb.RateLimitDescriptor, n uint64) *rlpb.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func request(domain string, ds ...*rlpb.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// check asks ShouldRateLimit and fails the test on an error.
func (ts *testService) check(t *testing.T, req *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	resp, err := ts.rls.ShouldRateLimit(t.Context(), req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
		t.Fatalf("got %d statuses, want %d (one per descriptor)", len(resp.GetStatuses()), len(req.GetDescriptors()))
	}
	return resp
}

// summary writes a response as "OVER_LIMIT: OK/2 OVER_LIMIT/0 OK/unlimited
// OK": the overall code, then each status's code and remaining count
// ("unlimited" for an unlimited rule, nothing when no limit applied).
func summary(resp *pb.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(resp.GetOverallCode().String())
	b.WriteString(":")
	for _, st := range resp.GetStatuses() {
		b.WriteString(" ")
		b.WriteString(st.GetCode().String())
		switch {
		case st.GetCurrentLimit() != nil:
			b.WriteString("/" + strconv.FormatUint(uint64(st.GetLimitRemaining()), 10))
		case st.GetLimitRemaining() == math.MaxUint32:
			b.WriteString("/unlimited")
		}
	}
	return b.String()
}

// step is one request of a sequence and the summary of its answer.
type step struct {
	req  *pb.RateLimitRequest
	want string
}

func runSteps(t *testing.T, ts *testService, steps []step) {
	t.Helper()
	for i, s := range steps {
		if got := summary(ts.check(t, s.req)); got != s.want {
			t.Fatalf("step %d: got %q, want %q", i, got, s.want)
		}
	}
}

// testAllowDeny asks for one user three times against a limit of 2 per
// hour and checks every field of the answers. The limit's windows are the
// clock's hours: a sequence during which an hour began is asked again, for
// another user.
func testAllowDeny(t *testing.T, ts *testService, domain string, wantName string) {
	t.Helper()
	want := []struct {
		code      pb.RateLimitResponse_Code
		remaining uint32
	}{
		{pb.RateLimitResponse_OK, 1},
		{pb.RateLimitResponse_OK, 0},
		{pb.RateLimitResponse_OVER_LIMIT, 0},
	}
	var resps []*pb.RateLimitResponse
	for user := 0; ; user++ {
		hour := time.Now().Truncate(time.Hour)
		resps = resps[:0]
		for range want {
			resps = append(resps, ts.check(t, request(domain, desc(fmt.Sprintf("user=alice%d", user)))))
		}
		if time.Now().Truncate(time.Hour).Equal(hour) {
			break
		}
		t.Logf("an hour began during the sequence for alice%d: again for alice%d", user, user+1)
	}
	for i, w := range want {
		resp := resps[i]
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != w.code || st.GetCode() != w.code {
			t.Errorf("call %d: got overall code %v, status code %v; want %v", i, resp.GetOverallCode(), st.GetCode(), w.code)
		}
		if st.GetLimitRemaining() != w.remaining {
			t.Errorf("call %d: limit_remaining: got %d, want %d", i, st.GetLimitRemaining(), w.remaining)
		}
		l := st.GetCurrentLimit()
		if l.GetRequestsPerUnit() != 2 || l.GetUnit() != pb.RateLimitResponse_RateLimit_HOUR || l.GetName() != wantName {
			t.Errorf("call %d: current_limit: got %v, want %q 2 per HOUR", i, l, wantName)
		}
		if d := st.GetDurationUntilReset().AsDuration(); st.GetDurationUntilReset() == nil || d <= 0 || d > time.Hour {
			t.Errorf("call %d: duration_until_reset: got %v, want within (0, 1h]", i, st.GetDurationUntilReset())
		}
	}
}

func TestServeRLSAllowThenDeny(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig, "native.yaml": nativeConfig})
	t.Run("envoy format", func(t *testing.T) { testAllowDeny(t, ts, "app", "") })
	t.Run("bouncer format", func(t *testing.T) { testAllowDeny(t, ts, "native", "hourly") })
}

// TestServeStores runs the allow-then-deny sequence on every store: the
// in-memory one, and Redis standalone and Cluster when the environment
// names their servers (scripts/redis-up.sh; .redis/env). The Redis servers
// are shared, so the domains are new on every run.
func TestServeStores(t *testing.T) {
	stores := []struct {
		name  string
		addrs func(testing.TB) []string // the Redis nodes; nil for memory
	}{
		{"memory", func(testing.TB) []string { return nil }},
		{"redis", func(t testing.TB) []string { return []string{redistest.Addr(t)} }},
		{"redis cluster", redistest.ClusterAddrs},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			addrs, store := st.addrs(t), "memory"
			if addrs != nil {
				store = "redis://" + strings.Join(addrs, ",")
			}
			run := fmt.Sprintf("e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
			ts := startTest(t, map[string]string{
				"app.yaml":    strings.Replace(appConfig, "domain: app", "domain: "+run+"-envoy", 1),
				"native.yaml": strings.Replace(nativeConfig, "domain: native", "domain: "+run+"-native", 1),
			}, func(c *serveConfig) { c.store = store })
			if store != "memory" {
				redisConnected(t, ts)
			}
			t.Run("envoy format", func(t *testing.T) { testAllowDeny(t, ts, run+"-envoy", "") })
			t.Run("bouncer format", func(t *testing.T) { testAllowDeny(t, ts, run+"-native", "hourly") })
			// The Redis store's own metrics are there with it, and only
			// then: connected, every node's breaker closed and none slow.
			_, body := ts.get(t, "/metrics")
			redis := addrs != nil
			for _, m := range []struct {
				name string
				want float64
			}{{"bouncer_redis_connected", 1}} {
				v, ok := sample(body, m.name)
				if ok != redis || (redis && v != m.want) {
					t.Errorf("%s: %v (present %v), want %v with a Redis store and absent without", m.name, v, ok, m.want)
				}
			}
			for _, name := range []string{"bouncer_redis_breaker_open", "bouncer_redis_node_slow"} {
				nodes := 0
				for _, addr := range addrs {
					if v, ok := sample(body, name, "node="+addr); ok {
						nodes++
						if v != 0 {
							t.Errorf("%s{node=%q}: %v, want 0", name, addr, v)
						}
					}
				}
				if (nodes > 0) != redis {
					t.Errorf("%s: %d nodes' series, want some with a Redis store and none without", name, nodes)
				}
			}
		})
	}
}

func TestServeRLSHitsAddend(t *testing.T) {
	reqHits := func(n uint32, ds ...*rlpb.RateLimitDescriptor) *pb.RateLimitRequest {
		r := request("app", ds...)
		r.HitsAddend = n
		return r
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a descriptor's hits_addend, 0 peeking", []step{
			{request("app", hits(desc("user=p"), 0)), "OK: OK/2"},
			{request("app", hits(desc("user=p"), 2)), "OK: OK/0"},
			{request("app", hits(desc("user=p"), 0)), "OK: OK/0"},
			{request("app", hits(desc("user=p"), 1)), "OVER_LIMIT: OVER_LIMIT/0"},
		}},
		{"the request's hits_addend, unless a descriptor sets its own", []step{
			{reqHits(2, desc("user=q"), hits(desc("user=r"), 1)), "OK: OK/0 OK/1"},
			{reqHits(0, desc("user=r")), "OK: OK/0"}, // 0 is 1, as in Envoy
			{reqHits(1, desc("user=q")), "OVER_LIMIT: OVER_LIMIT/0"},
		}},
		{"more hits than the limit", []step{
			{reqHits(3, desc("user=s")), "OVER_LIMIT: OVER_LIMIT/0"},
		}},
	}
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, ts, tt.steps) })
	}
}

func TestServeRLSHeaders(t *testing.T) {
	ietf := []string{"RateLimit-Policy", "RateLimit"}
	xrl := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
	tests := []struct {
		mode        string
		allowed     []string // header names on an allowed answer, in order
		deniedExtra []string // and on a denied one, after those
	}{
		{"all", append(slices.Clone(ietf), xrl...), []string{"Retry-After", "Content-Type"}},
		{"ietf", ietf, []string{"Retry-After", "Content-Type"}},
		{"x-ratelimit", xrl, []string{"Retry-After", "Content-Type"}},
		{"off", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			ts := startTest(t, map[string]string{"app.yaml": appConfig}, func(c *serveConfig) { c.headers = tt.mode })
			allowed := ts.check(t, request("app", hits(desc("user=h"), 2)))
			if got := headerNames(allowed); !slices.Equal(got, tt.allowed) {
				t.Errorf("allowed answer: got headers %q, want %q", got, tt.allowed)
			}
			denied := ts.check(t, request("app", desc("user=h")))
			if denied.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("second call: got %v, want OVER_LIMIT", denied.GetOverallCode())
			}
			want := append(slices.Clone(tt.allowed), tt.deniedExtra...)
			if got := headerNames(denied); !slices.Equal(got, want) {
				t.Errorf("denied answer: got headers %q, want %q", got, want)
			}
			if body := string(denied.GetRawBody()); (body != "") != (tt.mode != "off") || tt.mode != "off" && !strings.HasPrefix(body, `{"error":"rate_limited","message":"over the limit`) {
				t.Errorf("denied answer: raw_body %q, want the JSON of a denial unless off", body)
			}
			if tt.mode != "all" {
				return
			}
			h := headerMap(allowed)
			for name, want := range map[string]string{
				"RateLimit-Policy":      `"per_hour";q=2;w=3600`,
				"X-RateLimit-Limit":     "2",
				"X-RateLimit-Remaining": "0",
			} {
				if h[name] != want {
					t.Errorf("allowed answer: %s: got %q, want %q", name, h[name], want)
				}
			}
			if got := h["RateLimit"]; !strings.HasPrefix(got, `"per_hour";r=0;t=`) {
				t.Errorf("allowed answer: RateLimit: got %q, want \"per_hour\";r=0;t=…", got)
			}
			if n, err := strconv.Atoi(headerMap(denied)["Retry-After"]); err != nil || n < 1 || n > 3600 {
				t.Errorf("denied answer: Retry-After: got %q, want 1 to 3600 seconds", headerMap(denied)["Retry-After"])
			}
		})
	}
}

func headerNames(resp *pb.RateLimitResponse) []string {
	var out []string
	for _, h := range resp.GetResponseHeadersToAdd() {
		out = append(out, h.GetKey())
	}
	return out
}

func headerMap(resp *pb.RateLimitResponse) map[string]string {
	out := map[string]string{}
	for _, h := range resp.GetResponseHeadersToAdd() {
		out[h.GetKey()] = h.GetValue()
	}
	return out
}

func TestServeRLSInvalidRequests(t *testing.T) {
	many := make([]*rlpb.RateLimitDescriptor, rules.MaxDescriptors+1)
	for i := range many {
		many[i] = desc("user=m")
	}
	wide := desc()
	for range rules.MaxEntries + 1 {
		wide.Entries = append(wide.Entries, &rlpb.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	override := func(rate uint32, unit typev3.RateLimitUnit) *rlpb.RateLimitDescriptor {
		d := desc("user=o")
		d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rate, Unit: unit}
		return d
	}
	tests := []struct {
		name string
		req  *pb.RateLimitRequest
	}{
		{"domain too long", request(strings.Repeat("d", rules.MaxKeyLen+1), desc("user=a"))},
		{"too many descriptors", request("app", many...)},
		{"too many entries", request("app", wide)},
		{"key too long", request("app", desc(strings.Repeat("k", rules.MaxKeyLen+1)+"=v"))},
		{"value too long", request("app", desc("user="+strings.Repeat("v", rules.MaxValueLen+1)))},
		{"hits_addend too large", request("app", hits(desc("user=a"), rules.MaxHits+1))},
		{"override without a unit", request("app", override(1, typev3.RateLimitUnit_UNKNOWN))},
		{"override above a unit per nanosecond", request("app", override(math.MaxUint32, typev3.RateLimitUnit_SECOND))},
		{"override of one unit per nanosecond", request("app", override(1e9, typev3.RateLimitUnit_SECOND))},
	}
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ts.rls.ShouldRateLimit(t.Context(), tt.req)
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Errorf("got %v (%v), want InvalidArgument", got, err)
			}
		})
	}
	t.Run("the service still answers", func(t *testing.T) {
		if got := summary(ts.check(t, request("app", desc("user=a")))); got != "OK: OK/1" {
			t.Errorf("got %q, want %q", got, "OK: OK/1")
		}
	})
}

func TestServeRLSUnknownDomain(t *testing.T) {
	tests := []struct {
		setting  string
		wantCode codes.Code
		want     string // the summary of an OK answer
	}{
		{"error", codes.NotFound, ""},
		{"allow", codes.OK, "OK: OK OK"},
	}
	for _, tt := range tests {
		t.Run(tt.setting, func(t *testing.T) {
			ts := startTest(t, map[string]string{"app.yaml": appConfig}, func(c *serveConfig) { c.unknownDomain = tt.setting })
			resp, err := ts.rls.ShouldRateLimit(t.Context(), request("nowhere", desc("user=a"), desc("team=b")))
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("got %v (%v), want %v", got, err, tt.wantCode)
			}
			if err == nil {
				if got := summary(resp); got != tt.want {
					t.Errorf("got %q, want %q", got, tt.want)
				}
				if len(resp.GetResponseHeadersToAdd()) != 0 {
					t.Errorf("got headers %q, want none: no limit applied", headerNames(resp))
				}
			}
			// A known domain is served as usual.
			if got := summary(ts.check(t, request("app", desc("user=a")))); got != "OK: OK/1" {
				t.Errorf("known domain: got %q, want %q", got, "OK: OK/1")
			}
		})
	}
}

func TestServeGRPCHealthAndReflection(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	t.Run("health", func(t *testing.T) {
		resp, err := healthpb.NewHealthClient(ts.conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetStatus(); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("got %v, want SERVING", got)
		}
	})
	want := []string{"envoy.service.ratelimit.v3.RateLimitService", "envoy.service.rate_limit_quota.v3.RateLimitQuotaService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"}
	t.Run("registered", func(t *testing.T) {
		info := ts.grpc.GetServiceInfo()
		for _, name := range want {
			if _, ok := info[name]; !ok {
				t.Errorf("service %s is not registered", name)
			}
		}
	})
	t.Run("reflection lists the services", func(t *testing.T) {
		stream, err := reflectionpb.NewServerReflectionClient(ts.conn).ServerReflectionInfo(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		err = stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			got = append(got, s.GetName())
		}
		for _, name := range want {
			if !slices.Contains(got, name) {
				t.Errorf("got services %q, want them to include %s", got, name)
			}
		}
	})
}

// The same answers as rules.TestEnvoySemantics gives at the engine, here
// through the wire.
// By default, a domain read from envoyproxy/ratelimit's format answers
// as that project does, with no rate-limit headers and no raw_body, while
// one in Bouncer's format carries them; --headers sets both.
func TestServeHeadersByFormat(t *testing.T) {
	for _, tt := range []struct {
		flag        string
		envoy, ours bool // whether each domain's denial carries headers and a body
	}{
		{"", false, true},
		{"all", true, true},
		{"off", false, false},
	} {
		t.Run("headers="+tt.flag, func(t *testing.T) {
			ts := startTest(t, map[string]string{"native.yaml": nativeConfig, "edge.yaml": envoyConfig}, func(c *serveConfig) { c.headers = tt.flag })
			for _, d := range []struct {
				domain string
				desc   *rlpb.RateLimitDescriptor
				want   bool
			}{
				{"edge", hits(desc("user_id=h"), 4), tt.envoy},
				{"native", hits(desc("user=h"), 3), tt.ours},
			} {
				denied := ts.check(t, request(d.domain, d.desc))
				if denied.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
					t.Fatalf("%s: got %v, want OVER_LIMIT", d.domain, denied.GetOverallCode())
				}
				if got := len(denied.GetResponseHeadersToAdd()) > 0; got != d.want {
					t.Errorf("%s: headers %q, want some: %v", d.domain, headerNames(denied), d.want)
				}
				if got := len(denied.GetRawBody()) > 0; got != d.want {
					t.Errorf("%s: raw_body %q, want one: %v", d.domain, denied.GetRawBody(), d.want)
				}
			}
		})
	}
}

func TestServeEnvoyConfig(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"a key with any value counts per value", []step{
			{request("edge", desc("user_id=a")), "OK: OK/2"},
			{request("edge", desc("user_id=a")), "OK: OK/1"},
			{request("edge", desc("user_id=b")), "OK: OK/2"},
			{request("edge", desc("user_id=a")), "OK: OK/0"},
			{request("edge", desc("user_id=a")), "OVER_LIMIT: OVER_LIMIT/0"},
		}},
		{"exact value, wildcard, and nothing for other values", []step{
			{request("edge", desc("tenant=acme"), desc("tenant=bigco"), desc("tenant=small")), "OK: OK/4 OK/1 OK"},
			{request("edge", desc("tenant=bigco"), desc("tenant=bigger")), "OK: OK/0 OK/1"},
			{request("edge", desc("tenant=bigco")), "OVER_LIMIT: OVER_LIMIT/0"},
		}},
		{"share_threshold makes a wildcard one counter", []step{
			{request("edge", desc("path=/files/a")), "OK: OK/1"},
			{request("edge", desc("path=/files/b")), "OK: OK/0"},
			{request("edge", desc("path=/files/c")), "OVER_LIMIT: OVER_LIMIT/0"},
		}},
		{"nested descriptors and replaces", []step{
			{request("edge", desc("source=proxy", "dest=x")), "OK: OK/1"},
			{request("edge", desc("source=proxy")), "OK: OK"},
			{request("edge", desc("source=proxy", "dest=x", "extra=1")), "OK: OK"},
			// vip replaces per_dest: the x descriptor is not counted.
			{request("edge", desc("source=proxy", "dest=vip"), desc("source=proxy", "dest=x")), "OK: OK/3 OK"},
			{request("edge", desc("source=proxy", "dest=x")), "OK: OK/0"},
		}},
		{"unlimited, zero, no limit and unknown", []step{
			{request("edge", desc("internal=1"), desc("banned=1"), desc("whitelisted=1"), desc("nope=1")), "OVER_LIMIT: OK/unlimited OVER_LIMIT/0 OK OK"},
			{request("edge", hits(desc("banned=1"), 0)), "OVER_LIMIT: OVER_LIMIT/0"}, // hits were counted
			{request("edge", hits(desc("banned=2"), 0)), "OK: OK/0"},
		}},
		{"shadow mode answers OK, quota mode denies once every quota is spent", []step{
			{request("edge", desc("canary=1"), desc("quota=1")), "OK: OK/0 OK/0"},
			{request("edge", desc("canary=1"), desc("quota=1")), "OVER_LIMIT: OK/0 OVER_LIMIT/0"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startTest(t, map[string]string{"edge.yaml": envoyConfig})
			runSteps(t, ts, tt.steps)
		})
	}
}

func TestServeEnvoyConfigDetails(t *testing.T) {
	ts := startTest(t, map[string]string{"edge.yaml": envoyConfig})
	ts.check(t, request("edge", desc("canary=1"), desc("quota=1")))
	resp := ts.check(t, request("edge", desc("tenant=acme"), desc("internal=1"), desc("canary=1"), desc("quota=1")))
	acme, internal, canary, quota := resp.Statuses[0], resp.Statuses[1], resp.Statuses[2], resp.Statuses[3]
	if l := acme.GetCurrentLimit(); l.GetName() != "acme" || l.GetRequestsPerUnit() != 5 || l.GetUnit() != pb.RateLimitResponse_RateLimit_HOUR {
		t.Errorf("named rule: current_limit: got %v, want acme 5 per HOUR", l)
	}
	if internal.GetCurrentLimit() != nil || internal.GetDurationUntilReset() != nil || internal.GetLimitRemaining() != math.MaxUint32 {
		t.Errorf("unlimited rule: got %v, want no limit, no reset and the uint32 maximum remaining", internal)
	}
	if canary.GetCode() != pb.RateLimitResponse_OK || canary.GetDurationUntilReset() == nil {
		t.Errorf("shadow rule over its limit: got %v, want OK with a duration_until_reset", canary)
	}
	if quota.GetCode() != pb.RateLimitResponse_OVER_LIMIT || quota.GetDurationUntilReset() == nil {
		t.Errorf("quota-mode rule over its limit: got %v, want OVER_LIMIT with a duration_until_reset", quota)
	}
	if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("overall: got %v, want OVER_LIMIT: the request's one quota-mode descriptor is over", resp.GetOverallCode())
	}
}

// postCheck posts body to POST /v1/check and returns the status, the
// headers and the body decoded.
func (ts *testService) postCheck(t *testing.T, method, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+ts.httpAddr+"/v1/check", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s /v1/check: status %d, body not JSON: %v", method, resp.StatusCode, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", ct)
	}
	return resp.StatusCode, resp.Header, out
}

func TestServeJSONAllowThenDeny(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	const body = `{"domain": "app", "descriptors": [{"entries": [{"key": "user", "value": "j"}]}]}`
	for i, wantRemaining := range []float64{1, 0} {
		code, h, out := ts.postCheck(t, http.MethodPost, body)
		if code != http.StatusOK || out["overall_code"] != "OK" {
			t.Fatalf("call %d: got %d %v, want 200 and OK", i, code, out)
		}
		st := out["statuses"].([]any)[0].(map[string]any)
		if st["limit_remaining"] != wantRemaining {
			t.Errorf("call %d: limit_remaining: got %v, want %v", i, st["limit_remaining"], wantRemaining)
		}
		if got := h.Get("X-RateLimit-Remaining"); got != strconv.Itoa(int(wantRemaining)) {
			t.Errorf("call %d: X-RateLimit-Remaining: got %q, want %v", i, got, wantRemaining)
		}
	}
	code, h, out := ts.postCheck(t, http.MethodPost, body)
	if code != http.StatusTooManyRequests || out["overall_code"] != "OVER_LIMIT" || out["error"] != "rate_limited" {
		t.Fatalf("third call: got %d %v, want 429, OVER_LIMIT and error rate_limited", code, out)
	}
	retry, ok := out["retry_after"].(float64)
	if !ok || retry < 1 || retry > 3600 {
		t.Errorf("retry_after: got %v, want 1 to 3600 seconds", out["retry_after"])
	}
	if got := h.Get("Retry-After"); got != strconv.Itoa(int(retry)) {
		t.Errorf("Retry-After: got %q, want %v as retry_after", got, retry)
	}
}

func TestServeJSONBadInput(t *testing.T) {
	const entry = `{"entries": [{"key": "user", "value": "b"}]}`
	many := strings.TrimSuffix(strings.Repeat(entry+",", rules.MaxDescriptors+1), ",")
	tests := []struct {
		name       string
		method     string
		body       string
		wantStatus int
		wantError  string
	}{
		{"malformed JSON", "POST", `{"domain": "app", "descriptors": [`, 400, "invalid_request"},
		{"empty body", "POST", ``, 400, "invalid_request"},
		{"not an object", "POST", `[1, 2]`, 400, "invalid_request"},
		{"data after the object", "POST", `{"domain": "app", "descriptors": [` + entry + `]} {}`, 400, "invalid_request"},
		{"unknown field", "POST", `{"domain": "app", "descriptors": [` + entry + `], "cost": 1}`, 400, "invalid_request"},
		{"negative hits", "POST", `{"domain": "app", "descriptors": [` + entry + `], "hits_addend": -1}`, 400, "invalid_request"},
		{"negative descriptor hits", "POST", `{"domain": "app", "descriptors": [{"entries": [], "hits_addend": -2}]}`, 400, "invalid_request"},
		{"hits too large", "POST", `{"domain": "app", "descriptors": [` + entry + `], "hits_addend": 1099511627777}`, 400, "invalid_request"},
		{"hits overflowing", "POST", `{"domain": "app", "descriptors": [` + entry + `], "hits_addend": 1e30}`, 400, "invalid_request"},
		{"a string for a number", "POST", `{"domain": "app", "descriptors": [` + entry + `], "hits_addend": "1"}`, 400, "invalid_request"},
		{"empty domain", "POST", `{"domain": "", "descriptors": [` + entry + `]}`, 400, "invalid_request"},
		{"no descriptors", "POST", `{"domain": "app", "descriptors": []}`, 400, "invalid_request"},
		{"too many descriptors", "POST", `{"domain": "app", "descriptors": [` + many + `]}`, 400, "invalid_request"},
		{"value too long", "POST", `{"domain": "app", "descriptors": [{"entries": [{"key": "user", "value": "` + strings.Repeat("v", rules.MaxValueLen+1) + `"}]}]}`, 400, "invalid_request"},
		{"unknown unit", "POST", `{"domain": "app", "descriptors": [{"entries": [], "limit": {"requests_per_unit": 1, "unit": "fortnight"}}]}`, 400, "invalid_request"},
		{"override above a unit per nanosecond", "POST", `{"domain": "app", "descriptors": [{"entries": [], "limit": {"requests_per_unit": 4294967295, "unit": "second"}}]}`, 400, "invalid_request"},
		{"GET", "GET", ``, 405, "method_not_allowed"},
		{"PUT", "PUT", `{"domain": "app", "descriptors": [` + entry + `]}`, 405, "method_not_allowed"},
		{"body over the bound", "POST", `{"domain": "app", "descriptors": [` + entry + `], "x": "` + strings.Repeat("x", 64<<10) + `"}`, 413, "body_too_large"},
	}
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, h, out := ts.postCheck(t, tt.method, tt.body)
			if code != tt.wantStatus {
				t.Errorf("status: got %d, want %d (%v)", code, tt.wantStatus, out)
			}
			if out["error"] != tt.wantError {
				t.Errorf("error: got %v, want %q", out["error"], tt.wantError)
			}
			if msg, _ := out["message"].(string); msg == "" {
				t.Errorf("message: got %v, want a sentence", out["message"])
			}
			if code == 405 && h.Get("Allow") != "POST" {
				t.Errorf("Allow: got %q, want POST", h.Get("Allow"))
			}
		})
	}
}

// get fetches an admin path and returns the status and body.
func (ts *testService) get(t *testing.T, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ts.adminAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// getJSON fetches an admin path that must answer want, and decodes its
// body into out.
func (ts *testService) getJSON(t *testing.T, path string, want int, out any) {
	t.Helper()
	code, body := ts.get(t, path)
	if code != want {
		t.Fatalf("GET %s: got %d %s, want %d", path, code, body, want)
	}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// metric returns the value of the sample of name with exactly labels
// ("k=v" each) in the admin API's /metrics, and 0 if there is none.
func (ts *testService) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	code, body := ts.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: got %d, want 200", code)
	}
	v, _ := sample(body, name, labels...)
	return v
}

// redisConnected waits until the service's Redis store has connected:
// serve waits up to three seconds for it and then serves by policy
// meanwhile, and a loaded machine may take longer.
func redisConnected(t *testing.T, ts *testService) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ts.metric(t, "bouncer_redis_connected") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the Redis store has not connected after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sample finds a sample in Prometheus's text format.
func sample(body, name string, labels ...string) (float64, bool) {
	want := slices.Clone(labels)
	slices.Sort(want)
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		series, value, ok := cutLast(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		n, ls, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		got := parseLabels(strings.TrimSuffix(ls, "}"))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		return f, err == nil
	}
	return 0, false
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// parseLabels reads `a="x",b="y \"q\""` as ["a=x", `b=y "q"`].
func parseLabels(s string) []string {
	var out []string
	for s != "" {
		k, rest, ok := strings.Cut(s, `="`)
		if !ok {
			return append(out, "malformed:"+s)
		}
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					v.WriteByte('\n')
					continue
				}
			}
			v.WriteByte(rest[i])
		}
		out = append(out, k+"="+v.String())
		s = strings.TrimPrefix(rest[min(i+1, len(rest)):], ",")
	}
	return out
}

func TestServeAdmin(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig, "edge.yaml": envoyConfig})
	for range 3 {
		ts.check(t, request("app", desc("user=m")))
	}

	t.Run("healthz", func(t *testing.T) {
		var out map[string]string
		ts.getJSON(t, "/healthz", http.StatusOK, &out)
	})
	t.Run("readyz", func(t *testing.T) {
		var out map[string]string
		ts.getJSON(t, "/readyz", http.StatusOK, &out)
		if out["config_version"] != ts.engine.Config().Version {
			t.Errorf("config_version: got %q, want %q", out["config_version"], ts.engine.Config().Version)
		}
		ts.draining.Store(true)
		defer ts.draining.Store(false)
		ts.getJSON(t, "/readyz", http.StatusServiceUnavailable, &out)
	})
	t.Run("metrics", func(t *testing.T) {
		for result, want := range map[string]float64{"ok": 2, "over_limit": 1} {
			if got := ts.metric(t, "bouncer_decisions_total", "domain=app", "rule=user", "result="+result); got != want {
				t.Errorf("bouncer_decisions_total{rule=user,result=%s}: got %v, want %v", result, got, want)
			}
		}
	})
	t.Run("config", func(t *testing.T) {
		var out struct {
			Version string
			Files   []string
			Domains []struct {
				Name      string
				Semantics string
				Rules     int
			}
		}
		ts.getJSON(t, "/v1/config", http.StatusOK, &out)
		if out.Version != ts.engine.Config().Version || len(out.Version) != 12 {
			t.Errorf("version: got %q, want %q", out.Version, ts.engine.Config().Version)
		}
		if len(out.Files) != 2 || len(out.Domains) != 2 || out.Domains[0].Name != "app" || out.Domains[1].Name != "edge" {
			t.Errorf("got files %q and domains %+v, want 2 files and domains app and edge", out.Files, out.Domains)
		}
	})
	t.Run("rules page by page", func(t *testing.T) {
		var want []string
		for _, d := range ts.engine.Config().Domains() {
			for _, r := range d.Rules {
				want = append(want, d.Name+" "+r.Path)
			}
		}
		seen := map[string]int{}
		cursor := ""
		for page := 0; ; page++ {
			if page > len(want) {
				t.Fatalf("still paging after %d pages, for %d rules", page, len(want))
			}
			var out struct {
				Rules []struct {
					Domain string
					Path   string
				}
				NextCursor string `json:"next_cursor"`
			}
			ts.getJSON(t, "/v1/rules?limit=1&cursor="+cursor, http.StatusOK, &out)
			if len(out.Rules) != 1 {
				t.Fatalf("page %d: got %d rules, want 1", page, len(out.Rules))
			}
			seen[out.Rules[0].Domain+" "+out.Rules[0].Path]++
			if out.NextCursor == "" {
				break
			}
			cursor = out.NextCursor
		}
		for _, r := range want {
			if seen[r] != 1 {
				t.Errorf("rule %q: listed %d times, want once", r, seen[r])
			}
		}
		if len(seen) != len(want) {
			t.Errorf("listed %d distinct rules, want %d", len(seen), len(want))
		}
	})
	t.Run("bad paging", func(t *testing.T) {
		for _, q := range []string{
			"cursor=%25%25%25",
			"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("not-a-cursor")),
			"limit=0",
			"limit=1001",
			"limit=ten",
		} {
			var out map[string]string
			ts.getJSON(t, "/v1/rules?"+q, http.StatusBadRequest, &out)
			if out["error"] != "invalid_request" || out["message"] == "" {
				t.Errorf("%s: got %v, want error invalid_request and a message", q, out)
			}
		}
	})
	t.Run("pprof", func(t *testing.T) {
		if code, _ := ts.get(t, "/debug/pprof/"); code != http.StatusOK {
			t.Errorf("got %d, want 200", code)
		}
	})
	t.Run("reload counted", func(t *testing.T) {
		before := ts.metric(t, "bouncer_config_reloads_total", "result=success")
		writeConfig(t, ts.dir, "app.yaml", strings.Replace(appConfig, "requests_per_unit: 2", "requests_per_unit: 3", 1))
		if err := ts.reloader.Reload(); err != nil {
			t.Fatal(err)
		}
		if got := ts.metric(t, "bouncer_config_reloads_total", "result=success"); got != before+1 {
			t.Errorf("bouncer_config_reloads_total{result=success}: got %v, want %v", got, before+1)
		}
	})
}

// counter counts the calls of a test's workers, and tells a waiter of
// each.
type counter struct {
	n    atomic.Int64
	tick chan struct{} // a token after a call, if none is waiting
}

func newCounter() *counter { return &counter{tick: make(chan struct{}, 1)} }

func (c *counter) add() {
	c.n.Add(1)
	select {
	case c.tick <- struct{}{}:
	default:
	}
}

// await waits, 10s at most, until the workers have made n calls.
func (c *counter) await(t *testing.T, n int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for c.n.Load() < n {
		select {
		case <-c.tick:
		case <-deadline:
			t.Fatalf("the workers made %d calls in 10s, want %d", c.n.Load(), n)
		}
	}
}

// until polls cond, for 10s at most, until it holds: what a process
// does (its readiness, its answers, its log) is seen from outside, with
// no channel to wait on.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const (
	limitOne = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
	limitTwo = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
	broken   = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 2}\n"
)

// limitServed asks for a new value of k and returns the limit it gets.
func limitServed(t *testing.T, ts *testService) uint32 {
	t.Helper()
	resp := ts.check(t, request("d", desc("k="+strconv.FormatInt(time.Now().UnixNano(), 10))))
	return resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
}

func TestServeReloadOnChange(t *testing.T) {
	ts := startTest(t, map[string]string{"d.yaml": limitOne})
	old := ts.engine.Config().Version
	if got := limitServed(t, ts); got != 1 {
		t.Fatalf("before the change: got limit %d, want 1", got)
	}
	version := func() string {
		var out struct{ Version string }
		ts.getJSON(t, "/v1/config", http.StatusOK, &out)
		return out.Version
	}
	ts.awaitLog(t, "watching the config for changes")
	writeConfig(t, ts.dir, "d.yaml", limitTwo)
	ts.awaitLog(t, rules.Reloaded.String())
	if version() == old {
		t.Fatalf("after the reload: serving version %s, the old one", old)
	}
	if got := limitServed(t, ts); got != 5 {
		t.Errorf("after the change: got limit %d, want 5", got)
	}
	if got := ts.metric(t, "bouncer_config_reloads_total", "result=success"); got < 1 {
		t.Errorf("bouncer_config_reloads_total{result=success}: got %v, want at least 1", got)
	}
	if got, _ := sample(mustGet(t, ts, "/metrics"), "bouncer_config_info", "version="+version()); got != 1 {
		t.Errorf("bouncer_config_info of the new version: got %v, want 1", got)
	}
}

func mustGet(t *testing.T, ts *testService, path string) string {
	t.Helper()
	code, body := ts.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: got %d, want 200", path, code)
	}
	return body
}

func TestServeReloadRejectsInvalidConfig(t *testing.T) {
	ts := startTest(t, map[string]string{"d.yaml": limitOne})
	old := ts.engine.Config().Version
	failures := ts.metric(t, "bouncer_config_reloads_total", "result=failure")
	ts.awaitLog(t, "watching the config for changes")
	writeConfig(t, ts.dir, "d.yaml", broken)
	ts.awaitLog(t, rules.Rejected.String())
	if got := ts.metric(t, "bouncer_config_reloads_total", "result=failure"); got != failures+1 {
		t.Errorf("bouncer_config_reloads_total{result=failure}: got %v, want %v", got, failures+1)
	}
	var out struct{ Version string }
	ts.getJSON(t, "/v1/config", http.StatusOK, &out)
	if out.Version != old {
		t.Errorf("config version: got %q, want the old %q", out.Version, old)
	}
	if got := limitServed(t, ts); got != 1 {
		t.Errorf("got limit %d, want the old 1", got)
	}
	if err := ts.reloader.Reload(); err == nil {
		t.Errorf("Reload of the invalid config: got no error")
	}
}

// Calls in flight while the config is swapped all get an answer.
func TestServeReloadUnderLoad(t *testing.T) {
	ts := startTest(t, map[string]string{"d.yaml": limitOne})
	const workers = 8
	var (
		calls  = newCounter()
		stop   atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []string
	)
	defer func() { // also when a wait below fails
		stop.Store(true)
		wg.Wait()
	}()
	for w := range workers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				req := request("d", desc(fmt.Sprintf("k=%d", i%3)), desc(fmt.Sprintf("k=w%d", w)))
				resp, err := ts.rls.ShouldRateLimit(t.Context(), req)
				calls.add()
				if err == nil && len(resp.GetStatuses()) == 2 {
					continue
				}
				mu.Lock()
				failed = append(failed, fmt.Sprintf("got %v, err %v", resp, err))
				mu.Unlock()
			}
		})
	}
	configs := []string{limitTwo, limitOne, limitTwo, limitOne, limitTwo}
	for _, c := range configs {
		calls.await(t, calls.n.Load()+50) // some calls between swaps
		writeConfig(t, ts.dir, "d.yaml", c)
		if err := ts.reloader.Reload(); err != nil {
			t.Errorf("Reload: %v", err)
		}
	}
	calls.await(t, calls.n.Load()+50)
	stop.Store(true)
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d calls failed during reloads; the first: %s", len(failed), calls.n.Load(), failed[0])
	}
	if got := limitServed(t, ts); got != 5 {
		t.Errorf("after the last swap: got limit %d, want 5", got)
	}
}

// Shutdown lets the calls in flight finish: every call either succeeds or,
// once shutdown has begun, fails with UNAVAILABLE; then the listeners
// refuse connections.
func TestServeShutdownDrains(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	const workers = 16
	var (
		calls    = newCounter()
		stopping atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		bad      []string
	)
	defer func() { // also when the wait below fails: the workers end with the service
		ts.stop()
		wg.Wait()
	}()
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				// Mostly over the limit: answers, not errors.
				resp, err := ts.rls.ShouldRateLimit(t.Context(), request("app", desc(fmt.Sprintf("user=%d", w)), desc("team=all")))
				calls.add()
				if err == nil {
					if len(resp.GetStatuses()) != 2 {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("got %d statuses, want 2", len(resp.GetStatuses())))
						mu.Unlock()
					}
					continue
				}
				during := stopping.Load()
				if status.Code(err) != codes.Unavailable || !during {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("got %v (during shutdown: %v), want UNAVAILABLE during shutdown", err, during))
					mu.Unlock()
				}
				return
			}
		})
	}
	calls.await(t, 200)
	stopping.Store(true)
	ts.stop()
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	for _, addr := range []string{ts.grpcAddr, ts.httpAddr, ts.adminAddr} {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s accepts connections after shutdown", addr)
		}
	}
	if _, err := ts.rls.ShouldRateLimit(t.Context(), request("app", desc("user=late"))); status.Code(err) != codes.Unavailable {
		t.Errorf("a call after shutdown: got %v, want UNAVAILABLE", err)
	}
}

// cmdCase is one run of the binary's entry point and what it should
// print: substrings of stdout and stderr, "" for nothing at all.
type cmdCase struct {
	name       string
	args       []string
	wantCode   int
	wantStdout string
	wantStderr string
}

func runCases(t *testing.T, tests []cmdCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if !strings.Contains(stdout, tt.wantStdout) || tt.wantStdout == "" && stdout != "" {
				t.Errorf("stdout: got %q, want it to contain %q", stdout, tt.wantStdout)
			}
			if !strings.Contains(stderr, tt.wantStderr) || tt.wantStderr == "" && stderr != "" {
				t.Errorf("stderr: got %q, want it to contain %q", stderr, tt.wantStderr)
			}
		})
	}
}

// configs writes a good config directory and a bad config file.
func configs(t *testing.T) (good, bad string) {
	t.Helper()
	good = t.TempDir()
	writeConfig(t, good, "app.yaml", appConfig)
	writeConfig(t, good, "edge.yaml", envoyConfig)
	bad = filepath.Join(t.TempDir(), "bad.yaml")
	// A valid file, then a rule of an unknown unit on line 8.
	if err := os.WriteFile(bad, []byte(appConfig+"  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return good, bad
}

func TestCheckCommand(t *testing.T) {
	good, bad := configs(t)
	c, err := rules.Load(good)
	if err != nil {
		t.Fatal(err)
	}
	runCases(t, []cmdCase{
		{"good config", []string{"check", good}, exitOK, "ok: config version " + c.Version + "\n", ""},
		{"good config lists its domains", []string{"check", good}, exitOK, "domain edge (envoy semantics): 10 rules", ""},
		{"bad config", []string{"check", bad}, exitFail, "", bad + ":8: descriptors[2].rate_limit.unit: invalid rate limit unit 'fortnight'"},
		{"missing config", []string{"check", filepath.Join(good, "nope.yaml")}, exitFail, "", "no such file"},
		{"no argument", []string{"check"}, exitUsage, "", "usage: bouncer check [--mode strict|lease|async] [--on-store-error local|allow|deny] [--regions N] CONFIG"},
		{"a flag", []string{"check", "-v"}, exitUsage, "", "usage: bouncer check [--mode strict|lease|async] [--on-store-error local|allow|deny] [--regions N] CONFIG"},
	})
}

// The errors runServe reports before it serves anything.
func TestServeArgs(t *testing.T) {
	good, bad := configs(t)
	runCases(t, []cmdCase{
		{"no --config", []string{"serve"}, exitUsage, "", "--config is required"},
		{"a bad --headers", []string{"serve", "--config", good, "--headers", "some"}, exitUsage, "", "--headers"},
		{"a bad --store", []string{"serve", "--config", good, "--store", "mysql://x"}, exitUsage, "", "--store"},
		{"a password is not printed", []string{"serve", "--config", good, "--store", "redis://:hunter2@h:1/db"}, exitUsage, "", "redis://:xxxxx@h:1/db"},
		{"an argument", []string{"serve", "--config", good, "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{"a bad config", []string{"serve", "--config", bad, "--grpc-addr", "127.0.0.1:0", "--http-addr", "", "--admin-addr", ""}, exitFail, "", "fortnight"},
	})
	if _, _, stderr := runArgs(t, "serve", "--config", good, "--store", "redis://:hunter2@h:1/db"); strings.Contains(stderr, "hunter2") {
		t.Errorf("stderr: got %q, want the password hidden", stderr)
	}
}

// A year-long window, which envoyproxy/ratelimit configs have, is served
// on Redis and on a Cluster as in memory: counted, not refused.
func TestServeRedisCountsAYear(t *testing.T) {
	for name, addrs := range map[string]func(testing.TB) []string{
		"standalone": func(t testing.TB) []string { return []string{redistest.Addr(t)} },
		"cluster":    redistest.ClusterAddrs,
	} {
		t.Run(name, func(t *testing.T) {
			store := "redis://" + strings.Join(addrs(t), ",")
			domain := fmt.Sprintf("year-%d-%d", os.Getpid(), time.Now().UnixNano())
			ts := startTest(t, map[string]string{
				"y.yaml": "domain: " + domain + "\ndescriptors:\n  - key: a\n    rate_limit: {unit: year, requests_per_unit: 2}\n",
			}, func(c *serveConfig) { c.store = store })
			redisConnected(t, ts)
			for i, want := range []string{"OK: OK/1", "OK: OK/0", "OVER_LIMIT: OVER_LIMIT/0"} {
				resp := ts.check(t, request(domain, desc("a=x")))
				if got := summary(resp); got != want {
					t.Fatalf("call %d: got %q, want %q", i, got, want)
				}
				st := resp.GetStatuses()[0]
				if st.GetCurrentLimit().GetUnit() != pb.RateLimitResponse_RateLimit_YEAR {
					t.Errorf("call %d: current_limit %v, want a YEAR", i, st.GetCurrentLimit())
				}
				if d := st.GetDurationUntilReset().AsDuration(); d <= 0 || d > 366*24*time.Hour {
					t.Errorf("call %d: duration_until_reset %v, want within (0, 366 days]", i, d)
				}
			}
		})
	}
}

// A service on Redis starts serving once its store has connected, so
// that its very first check is counted in Redis (not decided by policy
// while it connects, and forgotten).
func TestServeRedisFirstCheckCounted(t *testing.T) {
	addr := redistest.Addr(t)
	domain := fmt.Sprintf("first-%d-%d", os.Getpid(), time.Now().UnixNano())
	ts := startTest(t, map[string]string{
		"f.yaml": "domain: " + domain + "\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 100}\n",
	}, func(c *serveConfig) { c.store = "redis://" + addr })
	if got := summary(ts.check(t, request(domain, hits(desc("a=x"), 10)))); got != "OK: OK/90" {
		t.Fatalf("first check of 10 hits: got %q, want OK: OK/90", got)
	}
	if n := ts.metric(t, "bouncer_redis_connected"); n != 1 {
		t.Fatalf("bouncer_redis_connected %v after the first check, want 1", n)
	}
	// A second instance reads the count in Redis.
	other := startTest(t, map[string]string{
		"f.yaml": "domain: " + domain + "\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 100}\n",
	}, func(c *serveConfig) { c.store = "redis://" + addr })
	if got := summary(other.check(t, request(domain, desc("a=x")))); got != "OK: OK/89" {
		t.Fatalf("a second instance's check: got %q, want OK: OK/89 (the first check's 10 counted in Redis)", got)
	}
	for i, s := range []*testService{ts, other} {
		if d := s.metric(t, "bouncer_decisions_total", "domain="+domain, "rule=a", "result=degraded"); d != 0 {
			t.Errorf("instance %d: %v degraded decisions, want 0", i+1, d)
		}
		if ok := s.metric(t, "bouncer_decisions_total", "domain="+domain, "rule=a", "result=ok"); ok != 1 {
			t.Errorf("instance %d: %v decisions ok, want 1", i+1, ok)
		}
	}
}

func TestServeEnvErrors(t *testing.T) {
	good, _ := configs(t)
	t.Setenv("BOUNCER_STORE_TIMEOUT", "soon")
	code, _, stderr := runArgs(t, "serve", "--config", good)
	if code != exitUsage || !strings.Contains(stderr, `BOUNCER_STORE_TIMEOUT="soon"`) {
		t.Errorf("got exit %d, stderr %q; want a usage error naming the variable", code, stderr)
	}
}

// --response-metadata turns on the gRPC answers' dynamic metadata, with a
// descriptor's config metadata in it; off, the default, answers carry
// none, as envoyproxy/ratelimit's do by default.
func TestServeResponseMetadata(t *testing.T) {
	const config = "domain: m\ndescriptors:\n  - key: svc\n    rate_limit: {unit: minute, requests_per_unit: 5}\n    metadata: {name: service_1}\n"
	for _, on := range []bool{false, true} {
		ts := startTest(t, map[string]string{"m.yaml": config}, func(c *serveConfig) { c.respMetadata = on })
		resp := ts.check(t, request("m", desc("svc=a")))
		md := resp.GetDynamicMetadata()
		switch {
		case !on && md != nil:
			t.Errorf("off: got dynamic metadata %v, want none", md)
		case on && md.GetFields()["metadata"].GetStructValue().GetFields()["name"].GetStringValue() != "service_1":
			t.Errorf("on: got dynamic metadata %v, want metadata.name service_1", md)
		}
	}
	var c serveConfig
	if err := serveFlags(&c, io.Discard).Parse([]string{"--response-metadata"}); err != nil || !c.respMetadata {
		t.Errorf("--response-metadata: got %v, %v; want it set", c.respMetadata, err)
	}
}
