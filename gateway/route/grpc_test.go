package route_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/bouncerhq/bouncer/gateway/route"
)

// trailerMethod is a unary method, registered by hand, that answers with
// a header and a trailer of its own.
const trailerMethod = "/route.test.Test/Trailer"

var testDesc = grpc.ServiceDesc{
	ServiceName: "route.test.Test",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Trailer", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := dec(new(emptypb.Empty)); err != nil {
			return nil, err
		}
		grpc.SetHeader(ctx, metadata.Pairs("x-header", "h"))
		grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "t"))
		return &emptypb.Empty{}, nil
	}}},
}

// newGRPCServer returns a gRPC server with the health service (service
// "svc" serving) and the test service.
func newGRPCServer() (*grpc.Server, *health.Server) {
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	srv.RegisterService(&testDesc, nil)
	return srv, hs
}

// grpcUpstream serves a gRPC server on a loopback listener, cleartext
// HTTP/2 as gRPC servers speak it, and returns its address.
func grpcUpstream(t *testing.T) (string, *health.Server) {
	t.Helper()
	srv, hs := newGRPCServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), hs
}

// blackHole accepts connections and never answers; it closes them when
// the test ends.
func blackHole(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return lis.Addr().String()
}

// dial returns a gRPC client connection to the gateway at base, closed
// when the test ends.
func dial(t *testing.T, base string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	cc, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// warmUpstream makes one call through the route of host warm.test, with
// no tight timeout, so that the gateway's connection to that route's
// upstream is up before a route with a short Timeout to the same
// upstream is timed: dialing it (a TLS handshake, under the race
// detector, on a busy machine) can take longer than that Timeout.
func warmUpstream(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	cc := dial(t, base, grpc.WithAuthority("warm.test"))
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"}); err != nil {
		t.Fatalf("warming the upstream up: %v", err)
	}
}

func TestGRPC(t *testing.T) {
	// Long enough for a warm exchange on a busy machine, short enough to
	// outlive by a stream.
	const timeout = 250 * time.Millisecond
	addr, hs := grpcUpstream(t)
	table := newTable(t, []route.Route{
		{Name: "grpc", PathPrefix: "/", Timeout: timeout, Upstreams: []string{"h2c://" + addr}},
		{Name: "warm", Host: "warm.test", PathPrefix: "/", Upstreams: []string{"h2c://" + addr}},
		{Name: "down", Host: "down.test", PathPrefix: "/", Upstreams: []string{"h2c://" + closedAddr(t)}},
		{Name: "slow", Host: "slow.test", PathPrefix: "/", Timeout: timeout, Upstreams: []string{"h2c://" + blackHole(t)}},
	}, route.Options{})
	base, _ := gateway(t, table, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("h2c upstream", func(t *testing.T) {
		warmUpstream(t, ctx, base)
		cc := dial(t, base)
		checkGRPC(t, ctx, cc, hs, timeout)
	})
	for _, tc := range []struct {
		host string
		code codes.Code
	}{
		{"down.test", codes.Unavailable},
		{"slow.test", codes.DeadlineExceeded},
	} {
		t.Run(tc.host, func(t *testing.T) {
			cc := dial(t, base, grpc.WithAuthority(tc.host))
			var trl metadata.MD
			_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"}, grpc.Trailer(&trl))
			st := status.Convert(err)
			name := strings.TrimSuffix(tc.host, ".test")
			if st.Code() != tc.code || !strings.Contains(st.Message(), `route "`+name+`"`) {
				t.Errorf("got %v: %q, want %v naming route %q", st.Code(), st.Message(), tc.code, name)
			}
			// A Trailers-Only answer: its metadata is the trailer.
			if len(trl.Get("x-request-id")) != 1 {
				t.Errorf("got trailer %v, want an x-request-id", trl)
			}
		})
	}
	t.Run("TLS upstream", func(t *testing.T) {
		srv, hs := newGRPCServer()
		up := httptest.NewUnstartedServer(srv)
		up.EnableHTTP2 = true
		up.StartTLS()
		t.Cleanup(srv.Stop)
		t.Cleanup(up.Close)
		tr := up.Client().Transport.(*http.Transport)
		table := newTable(t, []route.Route{
			{Name: "tls", PathPrefix: "/", Timeout: timeout, Upstreams: []string{up.URL}},
			{Name: "warm", Host: "warm.test", PathPrefix: "/", Upstreams: []string{up.URL}},
		}, route.Options{Transport: tr})
		base, _ := gateway(t, table, false)
		warmUpstream(t, ctx, base)
		cc := dial(t, base)
		checkGRPC(t, ctx, cc, hs, timeout)
	})
}

// checkGRPC makes unary and streaming calls through cc: statuses,
// headers and trailers must pass, and a stream must outlive the route's
// timeout.
func checkGRPC(t *testing.T, ctx context.Context, cc *grpc.ClientConn, hs *health.Server, timeout time.Duration) {
	t.Helper()
	client := healthpb.NewHealthClient(cc)
	var hdr, trl metadata.MD
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"}, grpc.Header(&hdr))
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: got %v, %v, want SERVING", resp, err)
	}
	if len(hdr.Get("x-request-id")) != 1 {
		t.Errorf("Check: got header metadata %v, want an x-request-id", hdr)
	}
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"})
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != "unknown service" {
		t.Errorf("Check of an unknown service: got %v %q, want NotFound \"unknown service\"", st.Code(), st.Message())
	}
	hdr = nil
	if err := cc.Invoke(ctx, trailerMethod, &emptypb.Empty{}, &emptypb.Empty{}, grpc.Header(&hdr), grpc.Trailer(&trl)); err != nil {
		t.Fatalf("Trailer: %v", err)
	}
	if hdr.Get("x-header")[0] != "h" || len(trl.Get("x-trailer")) != 1 || trl.Get("x-trailer")[0] != "t" {
		t.Errorf("Trailer: got header %v, trailer %v, want x-header: h and x-trailer: t", hdr, trl)
	}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	watch, err := client.Watch(sctx, &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if m, err := watch.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: got %v, %v, want SERVING", m, err)
	}
	// Longer than the route's Timeout, which bounds a gRPC exchange only
	// until its headers: the stream must outlive it.
	time.Sleep(3 * timeout)
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	defer hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	if m, err := watch.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after the route's timeout: got %v, %v, want NOT_SERVING", m, err)
	}
	stop()
	if _, err := watch.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("Watch after cancel: got %v, want Canceled", err)
	}
}
