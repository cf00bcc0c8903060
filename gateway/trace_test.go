package gateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/bouncerhq/bouncer/gateway"
)

// With a tracer, a request is a span, a child of the caller's trace, and
// the upstream's traceparent names that span.
func TestTracing(t *testing.T) {
	parents := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parents <- r.Header.Get("Traceparent")
	}))
	defer up.Close()
	cfg, err := gateway.Parse("g.yaml", []byte("listeners: [{addr: x}]\nroutes:\n  - {name: traced, path_prefix: /, upstreams: ["+up.URL+"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(t.Context())
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	defer otel.SetTextMapPropagator(prev)
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Tracer: tp.Tracer(gateway.TracerName)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g)
	defer srv.Close()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
	req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	parent := <-parents
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != "00f067aa0ba902b7" || s.Name() != "GET traced" {
		t.Fatalf("span %q in trace %s, parent %s: want GET traced, a child of the caller's span", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID())
	}
	if !strings.Contains(parent, traceID) || !strings.Contains(parent, s.SpanContext().SpanID().String()) {
		t.Fatalf("upstream's traceparent %q, want the gateway's span %s of trace %s", parent, s.SpanContext().SpanID(), traceID)
	}
}
