package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/grpclimit"
	"github.com/bouncerhq/bouncer/internal/edgetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	newStore  = edgetest.NewStore
	perMinute = edgetest.PerMinute
)

type (
	failing  = edgetest.Failing
	degraded = edgetest.Degraded
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The test service, registered by hand with emptypb.Empty messages: Fail
// (unary) ends as its "fail" metadata says, Hold (server streaming) as
// its "mode" metadata says.
const (
	failMethod = "/grpclimit.test.Test/Fail"
	holdMethod = "/grpclimit.test.Test/Hold"
	checkCall  = "/grpc.health.v1.Health/Check"
)

type testServer struct {
	entered chan string   // a Hold handler's mode, as it starts
	release chan struct{} // lets a holding handler return
	unhang  chan struct{} // closed, lets hung handlers return
	ended   chan string   // a Hold stream's mode, once the limiter is done with it
}

var testDesc = grpc.ServiceDesc{
	ServiceName: "grpclimit.test.Test",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Fail", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(emptypb.Empty)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, _ any) (any, error) { return srv.(*testServer).fail(ctx) }
		if icpt == nil {
			return h(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: failMethod}, h)
	}}},
	Streams: []grpc.StreamDesc{{StreamName: "Hold", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
		return srv.(*testServer).hold(ss)
	}}},
}

// fail ends as the call's "fail" metadata says: a code's name, "error"
// (not a status), "panic", or nothing (success).
func (s *testServer) fail(ctx context.Context) (any, error) {
	how := metadata.ValueFromIncomingContext(ctx, "fail")
	if len(how) == 0 {
		return &emptypb.Empty{}, nil
	}
	switch how[0] {
	case "error":
		return nil, errors.New("plain error")
	case "panic":
		panic("handler panic")
	}
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(`"` + how[0] + `"`)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return nil, status.Error(c, "failed as asked")
}

// hold sends a message, reports its mode on entered, then: "hold" returns when released;
// "panic" panics; "hang" waits for the client to go away, then for
// unhang.
func (s *testServer) hold(ss grpc.ServerStream) error {
	mode := "hold"
	if m := metadata.ValueFromIncomingContext(ss.Context(), "mode"); len(m) > 0 {
		mode = m[0]
	}
	// The first message sends the header metadata.
	if err := ss.SendMsg(&emptypb.Empty{}); err != nil {
		return err
	}
	s.entered <- mode
	switch mode {
	case "panic":
		panic("stream panic")
	case "hang":
		<-ss.Context().Done()
		<-s.unhang
		return nil
	}
	<-s.release
	return nil
}

// recoverUnary and recoverStream, in front of the limiter, turn a
// handler's panic into Internal, as a production server's recovery
// interceptor would: grpc-go does not recover panics. recoverStream
// reports a Hold stream's end on ts.ended.
func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(codes.Internal, "panic: %v", p)
		}
	}()
	return h(ctx, req)
}

func (ts *testServer) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(codes.Internal, "panic: %v", p)
		}
		if info.FullMethod == holdMethod {
			mode := "hold"
			if m := metadata.ValueFromIncomingContext(ss.Context(), "mode"); len(m) > 0 {
				mode = m[0]
			}
			select {
			case ts.ended <- mode:
			default:
			}
		}
	}()
	return h(srv, ss)
}

// authUnary and authStream stand for an authentication interceptor: the
// "user" metadata is taken as a verified credential.
func authUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if u := metadata.ValueFromIncomingContext(ctx, "user"); len(u) > 0 {
		ctx = bouncer.WithUser(ctx, u[0])
	}
	return h(ctx, req)
}

type userStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s userStream) Context() context.Context { return s.ctx }

func authStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if u := metadata.ValueFromIncomingContext(ss.Context(), "user"); len(u) > 0 {
		ss = userStream{ss, bouncer.WithUser(ss.Context(), u[0])}
	}
	return h(srv, ss)
}

// server is a real gRPC server on a loopback port, limited by the
// interceptors of lim, rules and o, and a client connected to it.
type server struct {
	cc     *grpc.ClientConn
	health healthpb.HealthClient
	ts     *testServer
}

func serve(t *testing.T, lim bouncer.Limiter, rules []grpclimit.Rule, o grpclimit.Options) *server {
	t.Helper()
	in, err := grpclimit.New(lim, rules, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{entered: make(chan string, 16), release: make(chan struct{}), unhang: make(chan struct{}), ended: make(chan string, 16)}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(recoverUnary, authUnary, in.Unary),
		grpc.ChainStreamInterceptor(ts.recoverStream, authStream, in.Stream),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	srv.RegisterService(&testDesc, ts)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &server{cc: cc, health: healthpb.NewHealthClient(cc), ts: ts}
}

// withMD returns a context carrying the outgoing metadata kv.
func withMD(ctx context.Context, kv ...string) context.Context {
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// result is how a call ended, seen by the client.
type result struct {
	code            codes.Code
	err             error
	header, trailer metadata.MD
}

// check makes a health Check call with the metadata kv.
func (s *server) check(t *testing.T, kv ...string) result {
	t.Helper()
	var r result
	_, r.err = s.health.Check(withMD(t.Context(), kv...), &healthpb.HealthCheckRequest{}, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	r.code = status.Code(r.err)
	return r
}

// fail calls Fail, asking it to end as how says.
func (s *server) fail(t *testing.T, how string) result {
	t.Helper()
	var r result
	ctx := t.Context()
	if how != "" {
		ctx = withMD(ctx, "fail", how)
	}
	r.err = s.cc.Invoke(ctx, failMethod, &emptypb.Empty{}, &emptypb.Empty{}, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	r.code = status.Code(r.err)
	return r
}

// open opens a Hold stream with the metadata kv.
func (s *server) open(ctx context.Context, t *testing.T, kv ...string) grpc.ClientStream {
	t.Helper()
	cs, err := s.cc.NewStream(withMD(ctx, kv...), &testDesc.Streams[0], holdMethod)
	if err != nil {
		t.Fatalf("NewStream: %v", err)
	}
	if err := cs.SendMsg(&emptypb.Empty{}); err != nil {
		t.Fatalf("SendMsg: %v", err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatalf("CloseSend: %v", err)
	}
	return cs
}

// end waits for the end of cs and returns its status code (OK for a
// clean end).
func end(cs grpc.ClientStream) result {
	var r result
	for r.err == nil {
		r.err = cs.RecvMsg(&emptypb.Empty{})
	}
	if errors.Is(r.err, io.EOF) {
		r.err = nil
	}
	r.code = status.Code(r.err)
	r.trailer = cs.Trailer()
	return r
}

func (r result) String() string {
	return fmt.Sprintf("%v (%v)", r.code, r.err)
}

// first is md's first value of key.
func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func has(md metadata.MD, prefix string) bool {
	for k := range md {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}
