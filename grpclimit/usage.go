package grpclimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Usage meters a rule in what calls consume when that is known only once
// the call has been served: the tokens an LLM used, the bytes a stream
// sent. A call reserves Estimate from the rule's limits before the
// handler runs, and is settled at Actual once the handler has returned:
// the rest is charged, past the limits if need be (a debt that later
// calls are refused until time pays it back), or what was not used is
// given back. A call refused up front is never settled, and a handler
// that panics leaves its estimate charged.
//
// Charging the rest needs a limiter that implements store.Charger (the
// stores do); with one that does not, only the unused part is given back,
// and the failure to charge is logged.
type Usage struct {
	// Estimate is what a call reserves before it is served:
	// EstimateCost and EstimateMetadata build common ones. Nil reserves
	// 1. An estimate below 1 reserves 1, so that a client in debt is
	// refused whatever it claims. An error fails the call with
	// InvalidArgument (through Options.OnError if set): the client's
	// fault.
	Estimate func(c *Call) (int64, error)

	// Actual is what the call cost, from how the handler ended it:
	// ActualMetadata and ActualSentBytes build common ones. ok false
	// leaves the estimate charged. Nil settles nothing: the estimate is
	// the cost.
	Actual func(c *Call, e *End) (cost int64, ok bool)
}

// End is how a handler ended a call, for Usage.Actual.
type End struct {
	// Header and Trailer are the metadata the handler set or sent
	// (grpc.SetHeader, grpc.SendHeader, grpc.SetTrailer, and the
	// ServerStream's methods), keys lower-case.
	Header, Trailer metadata.MD

	// SentBytes counts the wire size of the messages the handler sent:
	// the response of a unary call, the messages of a stream.
	SentBytes int64

	// Err is what the handler returned.
	Err error
}

// EstimateCost reserves n for every call.
func EstimateCost(n int64) func(*Call) (int64, error) {
	return func(*Call) (int64, error) { return n, nil }
}

// EstimateMetadata reserves the count a call states in its metadata
// name, such as x-estimated-tokens; 1 when it states none. A value that
// is not a count is an error. Clients choose the value: the settle
// charges what they really used, whatever they stated.
func EstimateMetadata(name string) func(*Call) (int64, error) {
	name = strings.ToLower(name)
	return func(c *Call) (int64, error) {
		vs := c.MD.Get(name)
		if len(vs) == 0 || vs[0] == "" {
			return 1, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("metadata %s: %q is not a count", name, vs[0])
		}
		return n, nil
	}
}

// ActualMetadata reads the cost from the handler's trailer name, or, if
// there is none, its header name, such as x-usage-tokens. A call without
// a valid count keeps its estimate.
func ActualMetadata(name string) func(*Call, *End) (int64, bool) {
	name = strings.ToLower(name)
	return func(_ *Call, e *End) (int64, bool) {
		vs := e.Trailer.Get(name)
		if len(vs) == 0 {
			vs = e.Header.Get(name)
		}
		if len(vs) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		return n, true
	}
}

// ActualSentBytes reads the cost from the bytes the handler sent.
func ActualSentBytes(_ *Call, e *End) (int64, bool) { return e.SentBytes, true }

// recorder records what a handler sets and sends, for End.
type recorder struct {
	mu              sync.Mutex
	header, trailer metadata.MD
	sent            int64
}

func (r *recorder) addHeader(md metadata.MD) {
	r.mu.Lock()
	r.header = metadata.Join(r.header, md)
	r.mu.Unlock()
}

func (r *recorder) addTrailer(md metadata.MD) {
	r.mu.Lock()
	r.trailer = metadata.Join(r.trailer, md)
	r.mu.Unlock()
}

func (r *recorder) addSent(m any) {
	if p, ok := m.(proto.Message); ok {
		r.mu.Lock()
		r.sent += int64(proto.Size(p))
		r.mu.Unlock()
	}
}

func (r *recorder) end(err error) *End {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &End{Header: r.header, Trailer: r.trailer, SentBytes: r.sent, Err: err}
}

// transportRecorder is a unary call's grpc.ServerTransportStream that
// records what the handler sets.
type transportRecorder struct {
	grpc.ServerTransportStream
	*recorder
}

func (t transportRecorder) SetHeader(md metadata.MD) error {
	t.addHeader(md)
	return t.ServerTransportStream.SetHeader(md)
}

func (t transportRecorder) SendHeader(md metadata.MD) error {
	t.addHeader(md)
	return t.ServerTransportStream.SendHeader(md)
}

func (t transportRecorder) SetTrailer(md metadata.MD) error {
	t.addTrailer(md)
	return t.ServerTransportStream.SetTrailer(md)
}

// recordUnary returns ctx with a transport stream that records into r
// what the handler sets; ctx as it is if it is not a server call's.
func recordUnary(ctx context.Context, r *recorder) context.Context {
	ts := grpc.ServerTransportStreamFromContext(ctx)
	if ts == nil {
		return ctx
	}
	return grpc.NewContextWithServerTransportStream(ctx, transportRecorder{ts, r})
}

// streamRecorder is a stream that records what the handler sets and
// sends.
type streamRecorder struct {
	grpc.ServerStream
	*recorder
}

func (s streamRecorder) SetHeader(md metadata.MD) error {
	s.addHeader(md)
	return s.ServerStream.SetHeader(md)
}

func (s streamRecorder) SendHeader(md metadata.MD) error {
	s.addHeader(md)
	return s.ServerStream.SendHeader(md)
}

func (s streamRecorder) SetTrailer(md metadata.MD) {
	s.addTrailer(md)
	s.ServerStream.SetTrailer(md)
}

func (s streamRecorder) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if err == nil {
		s.addSent(m)
	}
	return err
}
