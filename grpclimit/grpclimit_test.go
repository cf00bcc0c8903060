package grpclimit_test

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/grpclimit"
	"github.com/bouncerhq/bouncer/header"
)

func TestAllowedAndDeniedCalls(t *testing.T) {
	s, clock := newStore(t)
	srv := serve(t, s, []grpclimit.Rule{{Name: "per_peer", Key: grpclimit.Peer(nil), Limits: []bouncer.Limit{perMinute("m", 3)}}}, grpclimit.Options{})
	for i := range 3 {
		var r result
		if i < 2 {
			r = srv.check(t)
		} else {
			// A stream is one call, and its header says so too.
			ctx, cancel := context.WithCancel(t.Context())
			cs := srv.open(ctx, t)
			<-srv.ts.entered
			var err error
			if r.header, err = cs.Header(); err != nil {
				t.Fatalf("stream header: %v", err)
			}
			cancel()
			srv.ts.release <- struct{}{}
			end(cs)
		}
		if r.code != codes.OK {
			t.Fatalf("call %d: %v, want OK", i, r)
		}
		want := map[string]string{
			"ratelimit-policy":      `"per_peer";q=3;w=60`,
			"ratelimit":             `"per_peer";r=` + strconv.Itoa(2-i) + ";t=60",
			"x-ratelimit-limit":     "3",
			"x-ratelimit-remaining": strconv.Itoa(2 - i),
			"x-ratelimit-reset":     "60",
		}
		for k, v := range want {
			if got := first(r.header, k); got != v {
				t.Errorf("call %d: header %s = %q, want %q", i, k, got, v)
			}
		}
		if has(r.header, "retry-after") || has(r.header, "bouncer-degraded") {
			t.Errorf("call %d: header %v, want no retry-after nor bouncer-degraded", i, r.header)
		}
	}

	clock.Advance(15 * time.Second)
	r := srv.check(t)
	if r.code != codes.ResourceExhausted {
		t.Fatalf("4th call: %v, want ResourceExhausted", r)
	}
	st, _ := status.FromError(r.err)
	if st.Message() != "rate limit exceeded: per_peer" {
		t.Errorf("message %q, want %q", st.Message(), "rate limit exceeded: per_peer")
	}
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		default:
			t.Errorf("detail %T %v, want RetryInfo and QuotaFailure only", d, d)
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() != 45*time.Second {
		t.Errorf("RetryInfo %v, want a delay of 45s", retry)
	}
	if quota == nil || len(quota.Violations) != 1 {
		t.Fatalf("QuotaFailure %v, want one violation", quota)
	}
	if v := quota.Violations[0]; v.Subject != "per_peer" || v.QuotaId != "per_peer" || v.QuotaValue != 3 || v.Description != "3 requests per 1m0s" {
		t.Errorf("violation %v, want subject and quota id per_peer, value 3, description %q", v, "3 requests per 1m0s")
	}
	if strings.Contains(quota.String(), "127.0.0.1") {
		t.Errorf("QuotaFailure %v names the key", quota)
	}
	want := map[string]string{
		"retry-after":       "45",
		"ratelimit":         `"per_peer";r=0;t=45`,
		"ratelimit-policy":  `"per_peer";q=3;w=60`,
		"x-ratelimit-limit": "3",
	}
	for k, v := range want {
		if got := first(r.trailer, k); got != v {
			t.Errorf("denied call: trailer %s = %q, want %q", k, got, v)
		}
	}

	// A stream that opens over the limit is refused the same way.
	sr := end(srv.open(t.Context(), t))
	if sr.code != codes.ResourceExhausted || first(sr.trailer, "retry-after") != "45" {
		t.Fatalf("denied stream: %v, trailer %v, want ResourceExhausted with retry-after 45", sr, sr.trailer)
	}
	select {
	case m := <-srv.ts.entered:
		t.Fatalf("the denied stream reached its handler (%s)", m)
	default:
	}
}

func TestSpoofedForwardedForFromAnUntrustedPeerChangesNothing(t *testing.T) {
	spoofs := []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"}
	t.Run("untrusted", func(t *testing.T) {
		s, _ := newStore(t)
		// The loopback peer is not in the trusted prefixes.
		res := &clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
		srv := serve(t, s, []grpclimit.Rule{{Name: "per_peer", Key: grpclimit.Peer(res), Limits: []bouncer.Limit{perMinute("m", 2)}}}, grpclimit.Options{})
		for i, spoof := range spoofs {
			r := srv.check(t, "x-forwarded-for", spoof)
			if want := map[bool]codes.Code{true: codes.OK, false: codes.ResourceExhausted}[i < 2]; r.code != want {
				t.Fatalf("call %d claiming %s: %v, want %v (the peer is the client)", i, spoof, r, want)
			}
		}
	})
	t.Run("trusted", func(t *testing.T) {
		s, _ := newStore(t)
		res := &clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
		srv := serve(t, s, []grpclimit.Rule{{Name: "per_peer", Key: grpclimit.Peer(res), Limits: []bouncer.Limit{perMinute("m", 2)}}}, grpclimit.Options{})
		for _, client := range spoofs {
			for i := range 3 {
				r := srv.check(t, "x-forwarded-for", "198.51.100.9, "+client)
				if want := map[bool]codes.Code{true: codes.OK, false: codes.ResourceExhausted}[i < 2]; r.code != want {
					t.Fatalf("client %s, call %d: %v, want %v", client, i, r, want)
				}
			}
		}
	})
}

func TestRulesAreAllOrNothing(t *testing.T) {
	s, _ := newStore(t)
	rules := []grpclimit.Rule{
		{Name: "per_user", Key: grpclimit.User(), Limits: []bouncer.Limit{perMinute("m", 2)}},
		{Name: "global", Limits: []bouncer.Limit{perMinute("m", 3)}},
	}
	srv := serve(t, s, rules, grpclimit.Options{})
	steps := []struct {
		user string
		code codes.Code
	}{{"a", codes.OK}, {"a", codes.OK}, {"a", codes.ResourceExhausted}, {"a", codes.ResourceExhausted}, {"b", codes.OK}, {"b", codes.ResourceExhausted}, {"", codes.ResourceExhausted}}
	for i, st := range steps {
		var kv []string
		if st.user != "" {
			kv = []string{"user", st.user}
		}
		if r := srv.check(t, kv...); r.code != st.code {
			t.Fatalf("step %d (user %q): %v, want %v", i, st.user, r, st.code)
		}
	}
	// a's denied calls charged nothing to global: b got the third unit.
}

func TestShadowRulesNeverRefuse(t *testing.T) {
	s, _ := newStore(t)
	var mu sync.Mutex
	var shadowDenied int
	o := grpclimit.Options{Logger: discard(), Observe: func(c *grpclimit.Call, rule string, d bouncer.Decision, shadow bool) {
		mu.Lock()
		defer mu.Unlock()
		if shadow && rule == "trial" && !d.Allowed {
			shadowDenied++
		}
	}}
	rules := []grpclimit.Rule{
		{Name: "trial", Shadow: true, Limits: []bouncer.Limit{perMinute("m", 1)}},
		{Name: "real", Limits: []bouncer.Limit{perMinute("m", 10)}},
	}
	srv := serve(t, s, rules, o)
	for i := range 4 {
		r := srv.check(t)
		if r.code != codes.OK {
			t.Fatalf("call %d: %v, want OK (the shadow rule must not refuse)", i, r)
		}
		if got := first(r.header, "ratelimit-policy"); got != `"real";q=10;w=60` {
			t.Errorf("call %d: ratelimit-policy %q, want the enforcing rule's alone", i, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if shadowDenied != 3 {
		t.Errorf("shadow denials observed: %d, want 3", shadowDenied)
	}
}

func TestExclusionsAndCost(t *testing.T) {
	s, _ := newStore(t)
	o := grpclimit.Options{
		Exclude: grpclimit.ExcludeMethods("/grpc.health.v1.Health/"),
		Cost: func(c *grpclimit.Call) int64 {
			n, err := strconv.ParseInt(first(c.MD, "cost"), 10, 64)
			if err != nil {
				return 1
			}
			return n
		},
	}
	srv := serve(t, s, []grpclimit.Rule{{Name: "g", Limits: []bouncer.Limit{perMinute("m", 5)}}}, o)
	for range 10 {
		if r := srv.check(t); r.code != codes.OK || has(r.header, "ratelimit") || has(r.header, "x-ratelimit") {
			t.Fatalf("health check: %v, header %v, want OK and no rate-limit metadata", r, r.header)
		}
	}
	steps := []struct {
		cost      string
		code      codes.Code
		remaining string
	}{
		{"0", codes.OK, "5"}, // a peek: excluded calls and peeks charged nothing
		{"3", codes.OK, "2"},
		{"3", codes.ResourceExhausted, "2"},
		{"", codes.OK, "1"},
		{"-1", codes.InvalidArgument, ""},
	}
	for i, st := range steps {
		var r result
		r.err = srv.cc.Invoke(withMD(t.Context(), "cost", st.cost), failMethod, &emptypb.Empty{}, &emptypb.Empty{}, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
		r.code = status.Code(r.err)
		md := r.header
		if r.code != codes.OK {
			md = r.trailer
		}
		if r.code != st.code || first(md, "x-ratelimit-remaining") != st.remaining {
			t.Fatalf("step %d (cost %q): %v, remaining %q, want %v and %q", i, st.cost, r, first(md, "x-ratelimit-remaining"), st.code, st.remaining)
		}
	}
}

func TestDeniedOnlyAndSkipHeaders(t *testing.T) {
	s, _ := newStore(t)
	srv := serve(t, s, []grpclimit.Rule{{Name: "g", Limits: []bouncer.Limit{perMinute("m", 1)}}},
		grpclimit.Options{DeniedOnly: true, SkipHeaders: header.XRateLimit})
	r := srv.check(t)
	if r.code != codes.OK || has(r.header, "ratelimit") || has(r.header, "x-ratelimit") {
		t.Fatalf("allowed call: %v, header %v, want OK and no rate-limit metadata (DeniedOnly)", r, r.header)
	}
	r = srv.check(t)
	if r.code != codes.ResourceExhausted || first(r.trailer, "ratelimit") == "" || has(r.trailer, "x-ratelimit") || first(r.trailer, "retry-after") == "" {
		t.Fatalf("denied call: %v, trailer %v, want ResourceExhausted with ratelimit and retry-after, without x-ratelimit-*", r, r.trailer)
	}
}

// quotaOf is the QuotaFailure detail of err.
func quotaOf(t *testing.T, err error) *errdetails.QuotaFailure {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok && len(q.Violations) == 1 {
			return q
		}
	}
	t.Fatalf("%v: no QuotaFailure with one violation", err)
	return nil
}

// notifying is a limiter that reports each refund.
type notifying struct {
	bouncer.Limiter
	refunds chan bouncer.Request
}

func (n *notifying) Refund(ctx context.Context, r bouncer.Request) error {
	err := n.Limiter.Refund(ctx, r)
	n.refunds <- r
	return err
}

// noRefund fails if lim has reported a refund.
func noRefund(t *testing.T, lim *notifying, what string) {
	t.Helper()
	select {
	case r := <-lim.refunds:
		t.Fatalf("%s: refund %+v, want none", what, r)
	default:
	}
}

func TestConcurrencyLeasesLiveWithTheStream(t *testing.T) {
	s, _ := newStore(t)
	lim := &notifying{s, make(chan bouncer.Request, 16)}
	rules := []grpclimit.Rule{{Name: "inflight", Limits: []bouncer.Limit{{Name: "c", Algorithm: bouncer.Concurrency, Rate: 1, Period: time.Minute}}}}
	srv := serve(t, lim, rules, grpclimit.Options{})

	held := srv.open(t.Context(), t)
	<-srv.ts.entered
	r := end(srv.open(t.Context(), t))
	if r.code != codes.ResourceExhausted || !strings.Contains(first(r.trailer, "ratelimit-policy"), `qu="concurrent-requests"`) {
		t.Fatalf("second stream while one is open: %v, trailer %v, want ResourceExhausted under a concurrent-requests policy", r, r.trailer)
	}
	if q := quotaOf(t, r.err); q.Violations[0].Description != "1 concurrent-requests" {
		t.Errorf("concurrency violation %v, want the description %q", q, "1 concurrent-requests")
	}
	if u := srv.check(t); u.code != codes.ResourceExhausted {
		t.Fatalf("unary call while the stream is open: %v, want ResourceExhausted (one rule set)", u)
	}
	noRefund(t, lim, "while the stream is open")
	srv.ts.release <- struct{}{}
	if r := end(held); r.code != codes.OK {
		t.Fatalf("held stream: %v, want OK", r)
	}
	<-lim.refunds // its lease

	cases := []struct {
		name string
		mode string
		end  func(cs grpc.ClientStream, cancel context.CancelFunc) codes.Code
	}{
		{"returns", "hold", func(cs grpc.ClientStream, _ context.CancelFunc) codes.Code {
			srv.ts.release <- struct{}{}
			return end(cs).code
		}},
		{"panics", "panic", func(cs grpc.ClientStream, _ context.CancelFunc) codes.Code {
			return end(cs).code
		}},
		{"client cancels", "hang", func(cs grpc.ClientStream, cancel context.CancelFunc) codes.Code {
			cancel()
			return end(cs).code
		}},
	}
	wantCode := map[string]codes.Code{"hold": codes.OK, "panic": codes.Internal, "hang": codes.Canceled}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			cs := srv.open(ctx, t, "mode", c.mode)
			<-srv.ts.entered
			if got := c.end(cs, cancel); got != wantCode[c.mode] {
				t.Fatalf("stream: %v, want %v", got, wantCode[c.mode])
			}
			<-lim.refunds // freed, for "hang" while its handler still runs
			next := srv.open(t.Context(), t)
			if m := <-srv.ts.entered; m != "hold" {
				t.Fatalf("next stream entered as %q", m)
			}
			srv.ts.release <- struct{}{}
			if r := end(next); r.code != codes.OK {
				t.Fatalf("next stream: %v, want OK", r)
			}
			<-lim.refunds
		})
	}
	close(srv.ts.unhang) // the hung handler returns
	for m := range srv.ts.ended {
		if m == "hang" {
			break
		}
	}
	noRefund(t, lim, "the hung stream's end")
}

func TestRefundOnError(t *testing.T) {
	s, _ := newStore(t)
	lim := &notifying{s, make(chan bouncer.Request, 16)}
	rules := []grpclimit.Rule{
		{Name: "kind", RefundOnError: true, Limits: []bouncer.Limit{perMinute("m", 2)}},
		{Name: "strict", Limits: []bouncer.Limit{perMinute("m", 100)}},
	}
	srv := serve(t, lim, rules, grpclimit.Options{})
	cases := []struct {
		how      string // how Fail ends
		code     codes.Code
		refunded bool
	}{
		{"INTERNAL", codes.Internal, true},
		{"UNAVAILABLE", codes.Unavailable, true},
		{"error", codes.Unknown, true},
		{"DATA_LOSS", codes.DataLoss, true},
		{"DEADLINE_EXCEEDED", codes.DeadlineExceeded, true},
		{"panic", codes.Internal, true},
		{"NOT_FOUND", codes.NotFound, false},
		{"", codes.OK, false},
	}
	for _, c := range cases {
		name := c.how
		if name == "" {
			name = "success"
		}
		t.Run(name, func(t *testing.T) {
			if r := srv.fail(t, c.how); r.code != c.code {
				t.Fatalf("call: %v, want %v", r, c.code)
			}
			if !c.refunded {
				noRefund(t, lim, "a call the server did not fail")
				return
			}
			// The refund comes before the status is sent.
			select {
			case r := <-lim.refunds:
				if len(r.Keys) != 1 || !strings.HasPrefix(r.Keys[0].Key, "kind") || r.Cost != 1 {
					t.Fatalf("refund %+v, want 1 unit to the rule kind alone", r)
				}
			default:
				t.Fatal("no refund of a server failure")
			}
		})
	}
	// Six failures given back, two calls charged: kind is spent.
	if r := srv.fail(t, ""); r.code != codes.ResourceExhausted || first(r.trailer, "ratelimit-policy") != `"kind";q=2;w=60` {
		t.Fatalf("after the failures: %v, trailer %v, want ResourceExhausted by kind", r, r.trailer)
	}
}

// invalid is a limiter that finds every request invalid, as one that
// bounds its keys would find a client's over-long one.
type invalid struct{ bouncer.Limiter }

func (invalid) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{}, fmt.Errorf("%w: key too long", bouncer.ErrInvalidRequest)
}

func TestLimiterErrorsAndDegradedDecisions(t *testing.T) {
	s, _ := newStore(t)
	rules := []grpclimit.Rule{{Name: "g", Limits: []bouncer.Limit{perMinute("m", 1)}}}
	t.Run("default", func(t *testing.T) {
		srv := serve(t, failing{Limiter: s}, rules, grpclimit.Options{Logger: discard()})
		if r := srv.check(t); r.code != codes.Unavailable {
			t.Fatalf("store error: %v, want Unavailable", r)
		}
		if r := end(srv.open(t.Context(), t)); r.code != codes.Unavailable {
			t.Fatalf("store error on a stream: %v, want Unavailable", r)
		}
	})
	t.Run("invalid request", func(t *testing.T) {
		srv := serve(t, invalid{Limiter: s}, rules, grpclimit.Options{Logger: discard()})
		if r := srv.check(t); r.code != codes.InvalidArgument {
			t.Fatalf("an invalid request: %v, want InvalidArgument (the caller's fault, not an outage)", r)
		}
	})
	t.Run("OnError", func(t *testing.T) {
		var got error
		srv := serve(t, failing{Limiter: s}, rules, grpclimit.Options{OnError: func(ctx context.Context, err error) error {
			got = err
			return status.Error(codes.Aborted, "try elsewhere")
		}})
		if r := srv.check(t); r.code != codes.Aborted || got == nil || got.Error() != "store down" {
			t.Fatalf("custom OnError: %v, OnError saw %v, want Aborted after store down", r, got)
		}
	})
	t.Run("fail open", func(t *testing.T) {
		srv := serve(t, failing{Limiter: s}, rules, grpclimit.Options{OnError: func(context.Context, error) error { return nil }})
		for i := range 3 {
			if r := srv.check(t); r.code != codes.OK || has(r.header, "ratelimit") {
				t.Fatalf("call %d: %v, header %v, want OK without rate-limit metadata (OnError let it through)", i, r, r.header)
			}
		}
	})
	t.Run("degraded", func(t *testing.T) {
		srv := serve(t, degraded{Limiter: s}, rules, grpclimit.Options{DeniedOnly: true})
		if r := srv.check(t); r.code != codes.OK || first(r.header, "bouncer-degraded") != "true" || has(r.header, "ratelimit") {
			t.Fatalf("degraded allowed call: %v, header %v, want OK with bouncer-degraded: true alone", r, r.header)
		}
		if r := srv.check(t); r.code != codes.ResourceExhausted || first(r.trailer, "bouncer-degraded") != "true" {
			t.Fatalf("degraded denied call: %v, trailer %v, want ResourceExhausted with bouncer-degraded: true", r, r.trailer)
		}
	})
}

func TestInvalidRules(t *testing.T) {
	s, _ := newStore(t)
	cases := map[string][]grpclimit.Rule{
		"no name":     {{Limits: []bouncer.Limit{perMinute("m", 1)}}},
		"no limits":   {{Name: "x"}},
		"same name":   {{Name: "x", Limits: []bouncer.Limit{perMinute("m", 1)}}, {Name: "x", Limits: []bouncer.Limit{perMinute("m", 1)}}},
		"bad limit":   {{Name: "x", Limits: []bouncer.Limit{{Name: "m", Algorithm: bouncer.FixedWindow}}}},
		"limit twice": {{Name: "x", Limits: []bouncer.Limit{perMinute("m", 1), perMinute("m", 2)}}},
	}
	for name, rules := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := grpclimit.New(s, rules, grpclimit.Options{}); err == nil || !strings.HasPrefix(err.Error(), "grpclimit: ") {
				t.Fatalf("New: %v, want an error prefixed grpclimit:", err)
			}
		})
	}
	if _, err := grpclimit.New(nil, nil, grpclimit.Options{}); err == nil {
		t.Fatal("New accepted a nil limiter")
	}
}
