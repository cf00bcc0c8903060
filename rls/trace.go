package rls

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/bouncerhq/bouncer/rules"
)

// TracerName names the tracer a Server's Tracer should come from.
const TracerName = "github.com/bouncerhq/bouncer/rls"

// startSpan starts the span of one call, as a child of the trace the
// caller sent in its metadata (Envoy sends traceparent). With no tracer
// it starts nothing and costs nothing.
func (s *Server) startSpan(ctx context.Context) (context.Context, trace.Span) {
	if s.Tracer == nil {
		return ctx, nil
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = otel.GetTextMapPropagator().Extract(ctx, carrier(md))
	}
	return s.Tracer.Start(ctx, "ShouldRateLimit", trace.WithSpanKind(trace.SpanKindServer))
}

func endSpan(span trace.Span, domain string, n int, resp *rules.Response, err error) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("bouncer.domain", domain), attribute.Int("bouncer.descriptors", n))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "not decided")
		} else {
			span.SetAttributes(attribute.String("bouncer.overall_code", resp.Code.String()))
		}
	}
	span.End()
}

// carrier reads W3C trace context from gRPC metadata.
type carrier metadata.MD

func (c carrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c carrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
