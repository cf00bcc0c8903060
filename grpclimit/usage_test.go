package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/grpclimit"
	"github.com/bouncerhq/bouncer/internal/edgetest"
)

// The metering service: Complete (unary) and Stream (server streaming)
// report the tokens they used, the call's "want" metadata, in their
// trailer x-usage-tokens, as an LLM API does; Stream sends three
// messages of "token " first.
const (
	completeMethod = "/grpclimit.test.Meter/Complete"
	streamMethod   = "/grpclimit.test.Meter/Stream"
)

func want(ctx context.Context) metadata.MD {
	return metadata.Pairs("x-usage-tokens", metadata.ValueFromIncomingContext(ctx, "want")[0])
}

var meterDesc = grpc.ServiceDesc{
	ServiceName: "grpclimit.test.Meter",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Complete", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(emptypb.Empty)
		if err := dec(in); err != nil {
			return nil, err
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: completeMethod}, func(ctx context.Context, _ any) (any, error) {
			return &emptypb.Empty{}, grpc.SetTrailer(ctx, want(ctx))
		})
	}}},
	Streams: []grpc.StreamDesc{{StreamName: "Stream", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
		for range 3 {
			if err := ss.SendMsg(wrapperspb.String("token ")); err != nil {
				return err
			}
		}
		ss.SetTrailer(want(ss.Context()))
		return nil
	}}},
}

// meterServer serves the metering service behind interceptors of lim
// and rules, and returns a client connection to it.
func meterServer(t *testing.T, lim bouncer.Limiter, rules []grpclimit.Rule) *grpc.ClientConn {
	t.Helper()
	in, err := grpclimit.New(lim, rules, grpclimit.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(in.Unary), grpc.StreamInterceptor(in.Stream))
	s.RegisterService(&meterDesc, struct{}{})
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// meterCall calls method with the metadata estimate and want and
// returns its code; a stream is read to its end.
func meterCall(t *testing.T, cc *grpc.ClientConn, method, estimate, want string) codes.Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-estimate", estimate, "want", want)
	if method == completeMethod {
		return status.Code(cc.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{}))
	}
	cs, err := cc.NewStream(ctx, &meterDesc.Streams[0], method)
	if err != nil {
		return status.Code(err)
	}
	if err := cs.CloseSend(); err != nil {
		return status.Code(err)
	}
	for {
		if err := cs.RecvMsg(&wrapperspb.StringValue{}); err != nil {
			if errors.Is(err, io.EOF) {
				return codes.OK
			}
			return status.Code(err)
		}
	}
}

func TestUsageSettlesCalls(t *testing.T) {
	for _, method := range []string{completeMethod, streamMethod} {
		t.Run(method, func(t *testing.T) {
			l := &edgetest.Ledger{}
			cc := meterServer(t, l, []grpclimit.Rule{{
				Name: "tokens", Limits: []bouncer.Limit{perMinute("m", 100)},
				Usage: &grpclimit.Usage{Estimate: grpclimit.EstimateMetadata("x-estimate"), Actual: grpclimit.ActualMetadata("x-usage-tokens")},
			}})
			for i, s := range []struct {
				estimate, want string
				code           codes.Code
				used           int64
			}{
				{"1", "80", codes.OK, 80},                // a small estimate, charged what it used
				{"1", "70", codes.OK, 150},               // past the limit: a debt
				{"1", "1", codes.ResourceExhausted, 150}, // refused, never settled
			} {
				if got := meterCall(t, cc, method, s.estimate, s.want); got != s.code {
					t.Fatalf("call %d: %v, want %v", i, got, s.code)
				}
				if got := l.Used("tokens:", "m"); got != s.used {
					t.Errorf("call %d: %d charged, want %d", i, got, s.used)
				}
			}
			l2 := &edgetest.Ledger{}
			cc = meterServer(t, l2, []grpclimit.Rule{{
				Name: "tokens", Limits: []bouncer.Limit{perMinute("m", 100)},
				Usage: &grpclimit.Usage{Estimate: grpclimit.EstimateMetadata("x-estimate"), Actual: grpclimit.ActualMetadata("x-usage-tokens")},
			}})
			if got := meterCall(t, cc, method, "90", "10"); got != codes.OK {
				t.Fatalf("an estimate of 90: %v", got)
			}
			if got := l2.Used("tokens:", "m"); got != 10 {
				t.Errorf("after using 10 of an estimate of 90: %d charged, want 10", got)
			}
			if got := meterCall(t, cc, method, "many", "10"); got != codes.InvalidArgument {
				t.Errorf("an estimate that is not a count: %v, want InvalidArgument", got)
			}
		})
	}
}

func TestUsageSentBytes(t *testing.T) {
	l := &edgetest.Ledger{}
	cc := meterServer(t, l, []grpclimit.Rule{{
		Name: "bytes", Limits: []bouncer.Limit{perMinute("m", 100)},
		Usage: &grpclimit.Usage{Estimate: grpclimit.EstimateCost(50), Actual: grpclimit.ActualSentBytes},
	}})
	// Three messages of 8 bytes ("token " and its tag and length).
	if got := meterCall(t, cc, streamMethod, "", "1"); got != codes.OK {
		t.Fatalf("stream: %v", got)
	}
	if got := l.Used("bytes:", "m"); got != 24 {
		t.Errorf("after a stream of 24 bytes: %d charged, want 24", got)
	}
}

func TestUsageRuleCannotHoldLeases(t *testing.T) {
	_, err := grpclimit.New(&edgetest.Ledger{}, []grpclimit.Rule{{Name: "r", Limits: []bouncer.Limit{{Name: "c", Algorithm: bouncer.Concurrency, Rate: 1, Period: time.Minute}}, Usage: &grpclimit.Usage{}}}, grpclimit.Options{})
	if err == nil || !strings.Contains(err.Error(), "settled after the fact") {
		t.Errorf("err = %v, want one that says a metered rule cannot hold leases", err)
	}
}

// On the memory store: a stream whose trailer reports more than the
// bucket holds puts its client in debt, refused until time pays it back.
func TestUsageDebtOnTheStore(t *testing.T) {
	s, clock := newStore(t)
	cc := meterServer(t, s, []grpclimit.Rule{{
		Name:   "tokens",
		Limits: []bouncer.Limit{{Name: "m", Algorithm: bouncer.TokenBucket, Rate: 100, Period: time.Minute, Burst: 100}},
		Usage:  &grpclimit.Usage{Estimate: grpclimit.EstimateMetadata("x-estimate"), Actual: grpclimit.ActualMetadata("x-usage-tokens")},
	}})
	for i, s := range []struct {
		advance time.Duration
		want    string
		code    codes.Code
	}{
		{0, "150", codes.OK},                             // 150 used of 100: a debt of 50
		{0, "1", codes.ResourceExhausted},                // refused while in debt
		{30 * time.Second, "1", codes.ResourceExhausted}, // the debt paid, no token yet
		{time.Second, "1", codes.OK},                     // a token and more
	} {
		clock.Advance(s.advance)
		if got := meterCall(t, cc, streamMethod, "1", s.want); got != s.code {
			t.Fatalf("call %d: %v, want %v", i, got, s.code)
		}
	}
}
