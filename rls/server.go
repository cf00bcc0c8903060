package rls

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/rules"
)

// Server implements RateLimitService over a rules.Engine. It is safe for
// concurrent use.
type Server struct {
	pb.UnimplementedRateLimitServiceServer

	// Engine decides. Required.
	Engine *rules.Engine

	// Headers selects the rate-limit headers added to responses
	// (response_headers_to_add); header.Off adds none, as
	// envoyproxy/ratelimit does by default. In any other mode an
	// over-limit response also carries the JSON body of a denial
	// (raw_body, which Envoy sends as the body of its 429) with its
	// Content-Type.
	Headers header.Mode

	// EnvoyHeaders, if not nil, is the mode of the answers for domains
	// read from envoyproxy/ratelimit's format (rules.Domain.EnvoyFormat)
	// in place of Headers: bouncer serve sets header.Off there unless
	// --headers is given, so that a config moved from that project
	// answers as it did.
	EnvoyHeaders *header.Mode

	// DynamicMetadata sets every response's dynamic_metadata as
	// envoyproxy/ratelimit's main does with RESPONSE_DYNAMIC_METADATA:
	// the request's domain, descriptors and hits_addend, and the config
	// metadata of the descriptors that passed (see Metadata).
	DynamicMetadata bool

	// Tracer, if not nil, traces every call (a span per call, a child of
	// the caller's trace); nil traces nothing. Take it from
	// otel.Tracer(TracerName) once a tracer provider is set up.
	Tracer trace.Tracer
}

// New returns a server deciding with e and adding headers of mode.
func New(e *rules.Engine, mode header.Mode) *Server {
	return &Server{Engine: e, Headers: mode}
}

// Register registers s on g.
func (s *Server) Register(g *grpc.Server) { pb.RegisterRateLimitServiceServer(g, s) }

// ShouldRateLimit decides one request.
func (s *Server) ShouldRateLimit(ctx context.Context, in *pb.RateLimitRequest) (out *pb.RateLimitResponse, err error) {
	ctx, span := s.startSpan(ctx)
	var resp rules.Response
	defer func() { endSpan(span, in.GetDomain(), len(in.GetDescriptors()), &resp, err) }()
	req, err := Request(in)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	resp, err = s.Engine.Decide(ctx, req)
	if err != nil {
		return nil, statusOf(err)
	}
	if resp.Degraded() {
		// Best effort: outside a gRPC call (a direct call in a test)
		// there is no header to set.
		_ = grpc.SetHeader(ctx, degradedMD)
	}
	mode := s.Headers
	if s.EnvoyHeaders != nil {
		if d := s.Engine.Config().Domain(req.Domain); d != nil && d.EnvoyFormat {
			mode = *s.EnvoyHeaders
		}
	}
	out = Response(&resp, mode)
	if s.DynamicMetadata {
		out.DynamicMetadata = Metadata(in, &resp)
	}
	return out, nil
}

// degradedMD marks a response with a descriptor decided without the
// shared store.
var degradedMD = metadata.Pairs(header.Degraded, "true") // metadata keys are lower-cased

// limits holds one current_limit message per distinct limit reported,
// shared by every response that reports it: marshalling only reads a
// message, so responses on many goroutines may share one. It is bounded,
// since overrides in requests can name any limit.
var (
	limitMsgs  sync.Map // rules.CurrentLimit → *pb.RateLimitResponse_RateLimit
	headerMsgs sync.Map // header.Field → *core.HeaderValue, for fields that repeat
	shared     atomic.Int64
)

const maxShared = 1 << 14

func currentLimit(l rules.CurrentLimit) *pb.RateLimitResponse_RateLimit {
	return shareOf(&limitMsgs, l, func() *pb.RateLimitResponse_RateLimit {
		return &pb.RateLimitResponse_RateLimit{Name: l.Name, RequestsPerUnit: l.RequestsPerUnit, Unit: unitToProto(l.Unit)}
	})
}

// headerValue returns f as a message, shared for the fields that are the
// same in every answer under one limit (its policy and quota).
func headerValue(f header.Field) *core.HeaderValue {
	build := func() *core.HeaderValue { return &core.HeaderValue{Key: f.Name, Value: f.Value} }
	if !f.Constant {
		return build()
	}
	return shareOf(&headerMsgs, f, build)
}

// shareOf returns the message kept in m for k, building and keeping it the
// first time while fewer than maxShared are kept.
func shareOf[K comparable, V any](m *sync.Map, k K, build func() V) V {
	if v, ok := m.Load(k); ok {
		return v.(V)
	}
	v := build()
	if shared.Load() < maxShared {
		if _, loaded := m.LoadOrStore(k, v); !loaded {
			shared.Add(1)
		}
	}
	return v
}

// statusOf maps an error of Decide to a gRPC status: the one table of
// this transport.
func statusOf(err error) error {
	code := codes.Unavailable // the store failed
	var empty *rules.EmptyRequestError
	switch {
	case errors.As(err, &empty):
		code = codes.Unknown // as envoyproxy/ratelimit answers it
	case errors.Is(err, bouncer.ErrInvalidRequest):
		code = codes.InvalidArgument
	case errors.Is(err, rules.ErrUnknownDomain):
		code = codes.NotFound
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, err.Error())
}

// Request converts an RLS request to the rules package's form.
func Request(in *pb.RateLimitRequest) (rules.Request, error) {
	r := rules.Request{Domain: in.GetDomain(), HitsAddend: uint64(in.GetHitsAddend())}
	if len(in.GetDescriptors()) > rules.MaxDescriptors {
		return r, errors.New("too many descriptors")
	}
	r.Descriptors = make([]rules.Descriptor, len(in.GetDescriptors()))
	for i, d := range in.GetDescriptors() {
		if d == nil {
			return r, errors.New("a descriptor is null")
		}
		if len(d.GetEntries()) > rules.MaxEntries {
			return r, errors.New("a descriptor has too many entries")
		}
		out := &r.Descriptors[i]
		out.Entries = make([]rules.Entry, len(d.GetEntries()))
		for j, e := range d.GetEntries() {
			out.Entries[j] = rules.Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		if h := d.GetHitsAddend(); h != nil {
			v := h.GetValue()
			out.Hits = &v
		}
		if o := d.GetLimit(); o != nil {
			out.Limit = &rules.Override{RequestsPerUnit: o.GetRequestsPerUnit(), Unit: unitFromProto(o.GetUnit())}
		}
	}
	return r, nil
}

// Response converts a decision to an RLS response, adding headers of
// mode and, over the limit, the body of a denial; header.Off adds none
// and no body.
func Response(resp *rules.Response, mode header.Mode) *pb.RateLimitResponse {
	n := len(resp.Statuses)
	out := &pb.RateLimitResponse{
		OverallCode: code(resp.Code),
		Statuses:    make([]*pb.RateLimitResponse_DescriptorStatus, n),
	}
	// One allocation each for the statuses and their durations, rather
	// than one per descriptor.
	statuses := make([]pb.RateLimitResponse_DescriptorStatus, n)
	var durations []durationpb.Duration
	for i := range resp.Statuses {
		st := &resp.Statuses[i]
		ds := &statuses[i]
		ds.Code, ds.LimitRemaining = code(st.Code), st.Remaining
		if l := st.Limit; l != nil {
			ds.CurrentLimit = currentLimit(*l)
			if st.ResetAfter > 0 {
				if durations == nil {
					durations = make([]durationpb.Duration, n)
				}
				d := &durations[i]
				d.Seconds, d.Nanos = int64(st.ResetAfter/time.Second), int32(st.ResetAfter%time.Second)
				ds.DurationUntilReset = d
			}
		}
		out.Statuses[i] = ds
	}
	if mode == header.Off {
		// None at all: Retry-After, which package header writes for every
		// denied answer, is a header too, and envoyproxy/ratelimit adds
		// none unless asked.
		return out
	}
	fields := resp.Headers(mode)
	out.ResponseHeadersToAdd = make([]*core.HeaderValue, len(fields), len(fields)+1)
	for i, f := range fields {
		out.ResponseHeadersToAdd[i] = headerValue(f)
	}
	if v, ok := resp.Values(); ok && v.Denied {
		// Marshalling a Denial cannot fail.
		out.RawBody, _ = json.Marshal(v.Denial(resp.DenialMessage()))
		out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, jsonContent)
	}
	return out
}

// jsonContent is the Content-Type of a denial's body: Envoy lets it
// replace the text/plain of its own 429.
var jsonContent = &core.HeaderValue{Key: "Content-Type", Value: header.JSON}

func code(c rules.Code) pb.RateLimitResponse_Code {
	if c == rules.OverLimit {
		return pb.RateLimitResponse_OVER_LIMIT
	}
	return pb.RateLimitResponse_OK
}

var toProto = map[rules.Unit]pb.RateLimitResponse_RateLimit_Unit{
	rules.UnitSecond: pb.RateLimitResponse_RateLimit_SECOND,
	rules.UnitMinute: pb.RateLimitResponse_RateLimit_MINUTE,
	rules.UnitHour:   pb.RateLimitResponse_RateLimit_HOUR,
	rules.UnitDay:    pb.RateLimitResponse_RateLimit_DAY,
	rules.UnitWeek:   pb.RateLimitResponse_RateLimit_WEEK,
	rules.UnitMonth:  pb.RateLimitResponse_RateLimit_MONTH,
	rules.UnitYear:   pb.RateLimitResponse_RateLimit_YEAR,
}

func unitToProto(u rules.Unit) pb.RateLimitResponse_RateLimit_Unit { return toProto[u] }

var fromProto = map[typev3.RateLimitUnit]rules.Unit{
	typev3.RateLimitUnit_SECOND: rules.UnitSecond,
	typev3.RateLimitUnit_MINUTE: rules.UnitMinute,
	typev3.RateLimitUnit_HOUR:   rules.UnitHour,
	typev3.RateLimitUnit_DAY:    rules.UnitDay,
	unitWeek:                    rules.UnitWeek,
	typev3.RateLimitUnit_MONTH:  rules.UnitMonth,
	typev3.RateLimitUnit_YEAR:   rules.UnitYear,
}

// unitWeek is envoy.type.v3.RateLimitUnit's WEEK, which Envoy sends and
// envoyproxy/ratelimit honours in an override, but which the generated
// code this module uses does not name.
const unitWeek typev3.RateLimitUnit = 7

func unitFromProto(u typev3.RateLimitUnit) rules.Unit { return fromProto[u] }
