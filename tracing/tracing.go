// Package tracing turns on OpenTelemetry tracing for `bouncer serve`: an
// OTLP/gRPC exporter, a sampler that follows the caller's decision (Envoy
// sends a traceparent) and samples a ratio of the rest, and a Limiter that
// traces store calls. Tracing is off unless Start is called; the spans the
// transports make cost next to nothing then.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// Options configure Start.
type Options struct {
	// Endpoint is the OTLP/gRPC collector, host:port. Required.
	Endpoint string

	// Insecure sends spans without TLS, as to a collector on the same
	// host or pod.
	Insecure bool

	// SampleRatio is the share of traces started here that are kept,
	// from 0 to 1; a call that carries a sampled parent is always traced.
	SampleRatio float64

	// Service names this process in the traces; "" means "bouncer".
	Service string
}

// Start installs a global tracer provider exporting to o.Endpoint and the
// W3C trace-context propagator. The returned function flushes and stops
// it; call it on shutdown.
func Start(ctx context.Context, o Options) (func(context.Context) error, error) {
	if o.Endpoint == "" {
		return nil, errors.New("tracing: an endpoint is required")
	}
	if o.SampleRatio < 0 || o.SampleRatio > 1 {
		return nil, fmt.Errorf("tracing: sample ratio %v is not between 0 and 1", o.SampleRatio)
	}
	if o.Service == "" {
		o.Service = "bouncer"
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(o.Endpoint), otlptracegrpc.WithTimeout(5 * time.Second)}
	if o.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(o.Service))),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp.Shutdown, nil
}

// Limiter returns next with a span around every store call.
func Limiter(next bouncer.Limiter) bouncer.Limiter {
	return &traced{next: next, tracer: otel.Tracer("github.com/bouncerhq/bouncer/store")}
}

type traced struct {
	next   bouncer.Limiter
	tracer trace.Tracer
}

func (t *traced) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	ctx, span := t.tracer.Start(ctx, "store.Check", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	d, err := t.next.Check(ctx, r)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "store failed")
		return d, err
	}
	span.SetAttributes(
		attribute.Int("bouncer.keys", len(r.Keys)),
		attribute.Int64("bouncer.cost", r.Cost),
		attribute.Bool("bouncer.allowed", d.Allowed),
		attribute.Bool("bouncer.degraded", d.Degraded),
	)
	return d, nil
}

// CheckEach makes one span for the requests the store decides together
// (see bouncer.CheckEach).
func (t *traced) CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error) {
	ctx, span := t.tracer.Start(ctx, "store.CheckEach", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	bouncer.CheckEach(ctx, t.next, rs, ds, errs)
	failed := 0
	for _, err := range errs {
		if err != nil {
			span.RecordError(err)
			failed++
		}
	}
	if failed > 0 {
		span.SetStatus(codes.Error, "store failed")
	}
	span.SetAttributes(attribute.Int("bouncer.requests", len(rs)), attribute.Int("bouncer.failed", failed))
}

func (t *traced) Refund(ctx context.Context, r bouncer.Request) error {
	ctx, span := t.tracer.Start(ctx, "store.Refund", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	err := t.next.Refund(ctx, r)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "store failed")
	}
	return err
}

// Charge forwards to the store's Charge (store.Charger), or fails
// with an error wrapping errors.ErrUnsupported if it has none.
func (t *traced) Charge(ctx context.Context, r bouncer.Request) error {
	ctx, span := t.tracer.Start(ctx, "store.Charge", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	c, ok := t.next.(store.Charger)
	if !ok {
		return fmt.Errorf("tracing: %T cannot charge: %w", t.next, errors.ErrUnsupported)
	}
	err := c.Charge(ctx, r)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "store failed")
	}
	return err
}

func (t *traced) Reset(ctx context.Context, r bouncer.Request) error {
	ctx, span := t.tracer.Start(ctx, "store.Reset", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	err := bouncer.Reset(ctx, t.next, r)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "store failed")
	}
	return err
}
