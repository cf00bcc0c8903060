package main

import (
	"context"
	"encoding/hex"
	"net"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// collector is an OTLP/gRPC trace receiver on loopback that keeps the
// spans it is sent.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	g := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(g, c)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return c, l.Addr().String()
}

// With --otel-endpoint, a call is traced as a child of the trace the
// caller sent (as Envoy sends traceparent), with a span per store call,
// and the spans reach the collector by the time shutdown returns.
func TestServeTracing(t *testing.T) {
	col, addr := startCollector(t)
	ts := startTest(t, map[string]string{"app.yaml": appConfig}, func(c *serveConfig) {
		c.otelEndpoint, c.otelInsecure, c.otelSample = addr, true, 1
	})
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-"+traceID+"-"+parentID+"-01")
	if _, err := ts.rls.ShouldRateLimit(ctx, request("app", desc("user=traced"))); err != nil {
		t.Fatal(err)
	}
	ts.stop() // flushes the spans

	col.mu.Lock()
	defer col.mu.Unlock()
	var call *tracepb.Span
	for _, s := range col.spans {
		if s.Name == "ShouldRateLimit" {
			call = s
		}
	}
	if call == nil {
		t.Fatalf("got spans %v, want a ShouldRateLimit span", names(col.spans))
	}
	if got := hex.EncodeToString(call.TraceId); got != traceID {
		t.Errorf("trace id: got %s, want the caller's %s", got, traceID)
	}
	if got := hex.EncodeToString(call.ParentSpanId); got != parentID {
		t.Errorf("parent span: got %s, want the caller's %s", got, parentID)
	}
	store := 0
	for _, s := range col.spans {
		if s.Name == "store.Check" && string(s.ParentSpanId) == string(call.SpanId) {
			store++
		}
	}
	if store != 1 {
		t.Errorf("got %d store.Check spans under the call, want 1 (spans %v)", store, names(col.spans))
	}
}

func names(spans []*tracepb.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}
