package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// busyName is the name SayHello refuses with RESOURCE_EXHAUSTED, as a
// service over its own capacity would, so that the tour shows the
// gateway turning the gRPC side's refusal into a 429.
const busyName = "busy"

// busyRetry is the RetryInfo delay of that refusal: the gateway's
// Retry-After.
const busyRetry = 30 * time.Second

// greeter serves greeter.v1.Greeter with dynamicpb messages of the
// descriptor set: no generated code. It is safe for concurrent use.
type greeter struct {
	helloRequest, helloReply, addNoteRequest, note protoreflect.MessageDescriptor
	notes                                          atomic.Int32 // notes numbered so far
}

func newGreeter() (*greeter, error) {
	files, err := protodesc.NewFiles(descriptorSet())
	if err != nil {
		return nil, fmt.Errorf("transcode example: %w", err)
	}
	g := &greeter{}
	for name, d := range map[protoreflect.FullName]*protoreflect.MessageDescriptor{
		"greeter.v1.HelloRequest":   &g.helloRequest,
		"greeter.v1.HelloReply":     &g.helloReply,
		"greeter.v1.AddNoteRequest": &g.addNoteRequest,
		"greeter.v1.Note":           &g.note,
	} {
		found, err := files.FindDescriptorByName(name)
		if err != nil {
			return nil, fmt.Errorf("transcode example: %w", err)
		}
		*d = found.(protoreflect.MessageDescriptor)
	}
	return g, nil
}

// newServer is the example's gRPC server: the greeter and the standard
// health service, which the gateway's health route exposes.
func newServer() (*grpc.Server, error) {
	g, err := newGreeter()
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	srv.RegisterService(g.serviceDesc(), g)
	hs := health.NewServer()
	hs.SetServingStatus("greeter.v1.Greeter", grpc_health_v1.HealthCheckResponse_SERVING)
	grpc_health_v1.RegisterHealthServer(srv, hs)
	return srv, nil
}

// SayHello answers "Hello, <name>!", but to busyName.
func (g *greeter) SayHello(_ context.Context, in *dynamicpb.Message) (*dynamicpb.Message, error) {
	name := in.Get(g.helloRequest.Fields().ByName("name")).String()
	if name == busyName {
		st, err := status.New(codes.ResourceExhausted, "the greeter is busy; try again later").
			WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(busyRetry)})
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return nil, st.Err()
	}
	out := dynamicpb.NewMessage(g.helloReply)
	out.Set(g.helloReply.Fields().ByName("message"), protoreflect.ValueOfString("Hello, "+name+"!"))
	return out, nil
}

// AddNote numbers a note and hands it back, signed by the caller the
// gateway authenticated (its x-bouncer-subject metadata). The example
// keeps no notes: it shows a POST with a JSON body.
func (g *greeter) AddNote(ctx context.Context, in *dynamicpb.Message) (*dynamicpb.Message, error) {
	text := in.Get(g.addNoteRequest.Fields().ByName("text")).String()
	if strings.TrimSpace(text) == "" {
		return nil, status.Error(codes.InvalidArgument, "a note needs a text")
	}
	author := "anonymous"
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("x-bouncer-subject")) > 0 {
		author = md.Get("x-bouncer-subject")[0]
	}
	out := dynamicpb.NewMessage(g.note)
	fields := g.note.Fields()
	out.Set(fields.ByName("id"), protoreflect.ValueOfInt32(g.notes.Add(1)))
	out.Set(fields.ByName("text"), protoreflect.ValueOfString(text))
	out.Set(fields.ByName("author"), protoreflect.ValueOfString(author))
	return out, nil
}

// serviceDesc describes the greeter to grpc.Server, as generated code
// would: each method decodes its request into a dynamicpb message of the
// request type.
func (g *greeter) serviceDesc() *grpc.ServiceDesc {
	type call func(*greeter, context.Context, *dynamicpb.Message) (*dynamicpb.Message, error)
	method := func(name string, in protoreflect.MessageDescriptor, fn call) grpc.MethodDesc {
		full := "/greeter.v1.Greeter/" + name
		return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, icp grpc.UnaryServerInterceptor) (any, error) {
			req := dynamicpb.NewMessage(in)
			if err := dec(req); err != nil {
				return nil, err
			}
			if icp == nil {
				return fn(srv.(*greeter), ctx, req)
			}
			return icp(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, func(ctx context.Context, req any) (any, error) {
				return fn(srv.(*greeter), ctx, req.(*dynamicpb.Message))
			})
		}}
	}
	return &grpc.ServiceDesc{
		ServiceName: "greeter.v1.Greeter",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			method("SayHello", g.helloRequest, (*greeter).SayHello),
			method("AddNote", g.addNoteRequest, (*greeter).AddNote),
		},
		Metadata: "greeter/v1/greeter.proto",
	}
}
