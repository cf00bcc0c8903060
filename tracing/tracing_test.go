package tracing_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/tracing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeStore struct{ err error }

func (f fakeStore) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{Allowed: true}, f.err
}

func (f fakeStore) Refund(context.Context, bouncer.Request) error { return f.err }

func TestLimiterSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { tp.Shutdown(context.Background()) })

	ok := tracing.Limiter(fakeStore{})
	if _, err := ok.Check(context.Background(), bouncer.Request{Cost: 2}); err != nil {
		t.Fatal(err)
	}
	failing := tracing.Limiter(fakeStore{err: errors.New("down")})
	if _, err := failing.Check(context.Background(), bouncer.Request{}); err == nil {
		t.Fatal("got no error from a failing store")
	}
	if err := failing.Refund(context.Background(), bouncer.Request{}); err == nil {
		t.Fatal("got no error from a failing refund")
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("got %d spans, want 3", len(spans))
	}
	if spans[0].Name() != "store.Check" || spans[0].Status().Code == codes.Error {
		t.Errorf("first span: got %s %v, want an ok store.Check", spans[0].Name(), spans[0].Status())
	}
	for _, s := range spans[1:] {
		if s.Status().Code != codes.Error {
			t.Errorf("%s of a failing store: got status %v, want an error", s.Name(), s.Status())
		}
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	for name, o := range map[string]tracing.Options{
		"no endpoint":     {SampleRatio: 1},
		"ratio above one": {Endpoint: "127.0.0.1:4317", SampleRatio: 2},
	} {
		if _, err := tracing.Start(context.Background(), o); err == nil {
			t.Errorf("%s: got no error", name)
		}
	}
}
