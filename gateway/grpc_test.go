package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// gRPC calls and streams pass through the gateway to an h2c upstream and
// are limited like any request; a refused one is RESOURCE_EXHAUSTED with
// the rate-limit fields in its metadata, as a gRPC client reads it.
func TestGRPCThroughTheGateway(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := grpc.NewServer()
	healthpb.RegisterHealthServer(up, health.NewServer())
	go up.Serve(lis)
	defer up.Stop()

	cfg, err := gateway.Parse("g.yaml", []byte(`rules: r.yaml
listeners: [{addr: "127.0.0.1:0"}]
routes:
  - name: health
    path_prefix: /grpc.health.v1.Health/
    upstreams: [h2c://`+lis.Addr().String()+`]
    limits: {domain: api, descriptors: [[route]]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rules.Parse("r.yaml", []byte("domain: api\nrules:\n  - name: per_route\n    match: [{key: route}]\n    limits: [{name: hourly, rate: 3, period: 1h, algorithm: fixed_window}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	// The hour's window must not turn during the test.
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 30, 0, 0, time.UTC))
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 2 {
		var hdr metadata.MD
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("call %d: %v %v, want SERVING", i, resp, err)
		}
		if got := hdr.Get("ratelimit"); len(got) != 1 || !strings.Contains(got[0], "r="+string(rune('2'-i))) {
			t.Errorf("call %d: ratelimit metadata %q, want %d remaining", i, got, 2-i)
		}
	}
	// A stream is one request: the third unit.
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the stream's first message: %v %v", m, err)
	}
	var hdr metadata.MD
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&hdr))
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "hourly") {
		t.Fatalf("the 4th request: %v, want RESOURCE_EXHAUSTED naming the limit", err)
	}
	if len(hdr.Get("retry-after")) != 1 || len(hdr.Get("ratelimit-policy")) != 1 {
		t.Errorf("the refusal's metadata %v, want retry-after and ratelimit-policy", hdr)
	}
	// The stream opened before the limit was reached goes on.
	cancel()
}

// A route with grpc transcodes JSON/HTTP to the gRPC upstream: a method
// without a google.api.http annotation is POST /package.Service/Method.
func TestTranscodingRoute(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := grpc.NewServer()
	healthpb.RegisterHealthServer(up, health.NewServer())
	go up.Serve(lis)
	defer up.Stop()
	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{protodesc.ToFileDescriptorProto(healthpb.File_grpc_health_v1_health_proto)}}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "health.pb"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "g.yaml")
	if err := os.WriteFile(file, []byte(`listeners: [{addr: "127.0.0.1:0"}]
routes:
  - name: health-json
    path_prefix: /grpc.health.v1.Health/
    grpc: {descriptor_set: health.pb, upstream: h2c://`+lis.Addr().String()+`}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"SERVING"`) {
		t.Fatalf("POST Check: %d %s, want 200 with status SERVING", resp.StatusCode, body)
	}
	resp, err = http.Post(srv.URL+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(`{"service": "nope"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"not_found"`) {
		t.Fatalf("Check of an unknown service: %d %s, want 404 not_found (NOT_FOUND)", resp.StatusCode, body)
	}
}

// A transcoded call carries the caller's identity to the gRPC upstream
// as metadata, set by the gateway: a client cannot remove it by naming
// it in Connection, nor forge it with an underscore spelling, and the
// API key does not go along.
func TestTranscodedIdentity(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mds := make(chan metadata.MD, 4)
	up := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mds <- md
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(up, health.NewServer())
	go up.Serve(lis)
	defer up.Stop()
	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{protodesc.ToFileDescriptorProto(healthpb.File_grpc_health_v1_health_proto)}}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "health.pb"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "g.yaml")
	if err := os.WriteFile(file, []byte(`listeners: [{addr: "127.0.0.1:0"}]
auth:
  partners:
    api_keys:
      keys: [{id: acme, hash: "`+auth.HashKey("acme-secret-key")+`"}]
routes:
  - name: health-json
    path_prefix: /grpc.health.v1.Health/
    auth: partners
    grpc: {descriptor_set: health.pb, upstream: h2c://`+lis.Addr().String()+`}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/grpc.health.v1.Health/Check", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "acme-secret-key")
	req.Header.Set("Connection", "X-Bouncer-Subject, X-Bouncer-Auth-Method")
	req.Header["X_Bouncer_Plan"] = []string{"gold"}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST Check: %d %s, want 200", resp.StatusCode, body)
	}
	md := <-mds
	if got := md.Get("x-bouncer-subject"); len(got) != 1 || got[0] != "acme" {
		t.Errorf("upstream metadata x-bouncer-subject %q, want [acme]", got)
	}
	if got := md.Get("x-bouncer-auth-method"); len(got) != 1 || got[0] != "api_key" {
		t.Errorf("upstream metadata x-bouncer-auth-method %q, want [api_key]", got)
	}
	for k := range md {
		if k == "x_bouncer_plan" || k == "x-bouncer-plan" || k == "x-api-key" {
			t.Errorf("upstream metadata has %s %q", k, md[k])
		}
	}
}
