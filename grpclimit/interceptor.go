package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/internal/edge"
)

// DefaultMaxDelay is the longest a shaping rule holds a call when
// Options.MaxDelay is 0.
const DefaultMaxDelay = time.Second

// Options tune the interceptors. The zero value limits every call at a
// cost of 1 and sends every rate-limit field.
type Options struct {
	// Cost is what a call takes from every rule without Usage (whose
	// cost is its estimate, then its actual cost). Nil charges 1. A cost of
	// 0 charges nothing (the rules are only looked at, for the metadata);
	// a negative cost fails the call with InvalidArgument.
	Cost func(c *Call) int64

	// Exclude says which calls are not limited at all (no check, no
	// metadata). Nil excludes none, health checks included;
	// ExcludeMethods builds one.
	Exclude func(c *Call) bool

	// SkipHeaders are the field families not sent (header.IETF,
	// header.XRateLimit); zero sends both. retry-after is sent on every
	// denial regardless.
	SkipHeaders header.Mode

	// DeniedOnly sends the rate-limit fields on denials only (in the
	// trailer), not in the header metadata of allowed calls.
	DeniedOnly bool

	// OnError decides what becomes of a call that could not be decided
	// because the limiter failed (a store error its failure policy did
	// not cover): it returns the error, preferably a status, that the call
	// fails with, or nil to let the call through unlimited. Nil logs the
	// error and fails the call with Unavailable, but with InvalidArgument,
	// logged at debug, for an error wrapping bouncer.ErrInvalidRequest: the
	// call's own fault. A call whose client went away fails with its
	// context's error, without OnError.
	OnError func(ctx context.Context, err error) error

	// MaxDelay bounds how long a shaping rule holds a call; one that
	// would wait longer is refused, with a retry delay of the excess. Zero
	// means DefaultMaxDelay.
	MaxDelay time.Duration

	// Observe, if set, is told every decision of a rule set: the
	// enforcing rules together (rule is the binding one's name), and each
	// shadow rule on its own (shadow true). For metrics.
	Observe func(c *Call, rule string, d bouncer.Decision, shadow bool)

	// Logger receives shadow denials and limiter errors. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Interceptor limits the calls of a gRPC server: its Unary and Stream
// methods are the server interceptors, which share one rule set, so that
// a client's unary calls and streams count against the same limits.
// Install both, after any authentication or recovery interceptor:
//
//	grpc.NewServer(
//		grpc.ChainUnaryInterceptor(recovery, auth, lim.Unary),
//		grpc.ChainStreamInterceptor(recoveryStream, authStream, lim.Stream),
//	)
//
// The interceptors do not recover a handler's panic: they give back its
// leases and refunds and let the panic go on, which crashes the process
// unless an interceptor in front of them recovers it (grpc-go itself does
// not). An Interceptor is made by New and is safe for concurrent use.
type Interceptor struct {
	set   *edge.Set[*Call]
	usage []*Usage // by rule index; nil for a rule without
	o     Options
	mode  header.Mode
	log   *slog.Logger
}

// New returns the interceptors that limit calls under rules, charging
// lim. The rules are checked together, all or nothing, in one call to
// lim; shadow rules in a call of their own. It returns an error if a rule
// is invalid.
func New(lim bouncer.Limiter, rules []Rule, o Options) (*Interceptor, error) {
	in := &Interceptor{o: o, mode: header.All &^ o.SkipHeaders, log: o.Logger}
	if in.log == nil {
		in.log = slog.Default()
	}
	maxDelay := o.MaxDelay
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	rs := make([]edge.Rule[*Call], len(rules))
	in.usage = make([]*Usage, len(rules))
	for i, r := range rules {
		rs[i] = edge.Rule[*Call]{Name: r.Name, Key: r.Key, Limits: r.Limits, Shadow: r.Shadow, RefundOnFailure: r.RefundOnError}
		if u := r.Usage; u != nil {
			in.usage[i] = u
			rs[i].Estimate = estimate(u.Estimate)
		}
	}
	set, err := edge.New(lim, rs, maxDelay, in.log.With("component", "grpclimit"), o.Observe)
	if err != nil {
		return nil, fmt.Errorf("grpclimit: %w", err)
	}
	in.set = set
	return in, nil
}

// Unary is the grpc.UnaryServerInterceptor: it decides the call, sends
// the rate-limit fields in the header metadata (grpc.SetHeader) or, when
// refused, in the trailer with a ResourceExhausted status, and runs the
// handler if the call is allowed.
func (in *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c, h, md, err := in.admit(ctx, info.FullMethod)
	if err != nil {
		if md != nil {
			_ = grpc.SetTrailer(ctx, md)
		}
		return nil, err
	}
	if md != nil {
		// Fails only on a context that is not a server call's.
		_ = grpc.SetHeader(ctx, md)
	}
	var rec *recorder
	if h != nil && h.Metered {
		rec = &recorder{}
		ctx = recordUnary(ctx, rec)
	}
	var resp any
	err = in.run(c, h, rec, func() error {
		var err error
		resp, err = handler(ctx, req)
		if rec != nil && err == nil {
			rec.addSent(resp)
		}
		return err
	})
	return resp, err
}

// Stream is the grpc.StreamServerInterceptor: a stream is one call for
// the limits, decided and charged when it opens, as Unary decides a call.
// Its Concurrency leases are held while it lives.
func (in *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	c, h, md, err := in.admit(ctx, info.FullMethod)
	if err != nil {
		if md != nil {
			ss.SetTrailer(md)
		}
		return err
	}
	if md != nil {
		_ = ss.SetHeader(md)
	}
	var rec *recorder
	if h != nil && h.Metered {
		rec = &recorder{}
		ss = streamRecorder{ss, rec}
	}
	return in.run(c, h, rec, func() error { return handler(srv, ss) })
}

// admit decides the call to method. It returns the call, what it gives
// back or settles when it ends (nil if nothing), the metadata to send,
// and, when the call must not run, the error it ends with: a denial (md
// then goes in the trailer), or the limiter's failure.
func (in *Interceptor) admit(ctx context.Context, method string) (*Call, *edge.Hold, metadata.MD, error) {
	c := newCall(ctx, method)
	if in.o.Exclude != nil && in.o.Exclude(c) {
		return c, nil, nil, nil
	}
	cost := int64(1)
	if in.o.Cost != nil {
		if cost = in.o.Cost(c); cost < 0 {
			return c, nil, nil, status.Error(codes.InvalidArgument, "the call's cost is negative")
		}
	}
	a, err := in.set.Admit(ctx, c, cost)
	if err != nil {
		return c, nil, nil, in.fail(ctx, method, err)
	}
	if !a.Limited {
		return c, a.Hold, nil, nil
	}
	var md metadata.MD
	if !a.Decision.Allowed || !in.o.DeniedOnly {
		md = metadata.MD{}
		for _, f := range a.Values.Append(nil, in.mode) {
			md.Set(f.Name, f.Value)
		}
	}
	if a.Decision.Degraded {
		if md == nil {
			md = metadata.MD{}
		}
		md.Set(header.Degraded, "true") // metadata keys are lower-cased
	}
	if !a.Decision.Allowed {
		return c, nil, md, denial(a.Rule, a.Values).Err()
	}
	return c, a.Hold, md, nil
}

// run runs the handler of an admitted call c, settles it from what rec
// recorded if it is metered, and ends its hold (nil for none) when the
// handler returns or panics, or, for its leases, when the client goes
// away.
func (in *Interceptor) run(c *Call, h *edge.Hold, rec *recorder, handler func() error) error {
	var err error
	h.Run(func() bool {
		err = handler()
		if rec != nil {
			e := rec.end(err)
			h.Settle(func(i int) (int64, bool) {
				if u := in.usage[i]; u != nil && u.Actual != nil {
					return u.Actual(c, e)
				}
				return 0, false
			})
		}
		return serverFailure(err)
	})
	return err
}

// estimate is a metered rule's edge.Rule.Estimate: est's, or 1, and an
// error the call's fault.
func estimate(est func(*Call) (int64, error)) func(*Call) (int64, error) {
	if est == nil {
		return func(*Call) (int64, error) { return 1, nil }
	}
	return func(c *Call) (int64, error) {
		n, err := est(c)
		if err != nil {
			return 0, fmt.Errorf("%w: estimate: %v", bouncer.ErrInvalidRequest, err)
		}
		return n, nil
	}
}

// serverFailure reports whether err, a handler's error, is the server's
// failure rather than a refusal of the client's call. An error that is
// not a status is sent as Unknown, or, for a context's error, as
// Canceled or DeadlineExceeded, as grpc-go sends it.
func serverFailure(err error) bool {
	s, ok := status.FromError(err)
	if !ok {
		s = status.FromContextError(err)
	}
	switch s.Code() {
	case codes.Internal, codes.Unavailable, codes.Unknown, codes.DataLoss, codes.DeadlineExceeded:
		return true
	}
	return false
}

// fail returns the error a call ends with when the limiter failed.
func (in *Interceptor) fail(ctx context.Context, method string, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err() // the client went away
	}
	if in.o.OnError != nil {
		return in.o.OnError(ctx, err)
	}
	if errors.Is(err, bouncer.ErrInvalidRequest) {
		// The call's own fault, not an outage: logged at debug.
		in.log.Debug("grpclimit: invalid request", "method", method, "err", err)
		return status.Error(codes.InvalidArgument, "the call cannot be decided: "+err.Error())
	}
	in.log.Error("grpclimit: limiter failed", "method", method, "err", err)
	return status.Error(codes.Unavailable, "the rate limiter could not decide this call")
}

func newCall(ctx context.Context, method string) *Call {
	c := &Call{Ctx: ctx, Method: method}
	c.MD, _ = metadata.FromIncomingContext(ctx)
	if p, ok := peer.FromContext(ctx); ok {
		c.Peer = addrOf(p.Addr)
	}
	return c
}

// addrOf is the IP address of a, unmapped and without a zone; the zero
// Addr if a has none.
func addrOf(a net.Addr) netip.Addr {
	var ip netip.Addr
	switch a := a.(type) {
	case nil:
	case *net.TCPAddr:
		ip = a.AddrPort().Addr()
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	return ip.Unmap().WithZone("")
}
