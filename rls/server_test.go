package rls_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rls"
	"github.com/bouncerhq/bouncer/rules"
)

func entries(pairs ...string) []*rlpb.RateLimitDescriptor_Entry {
	var out []*rlpb.RateLimitDescriptor_Entry
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		out = append(out, &rlpb.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return out
}

func ptr(n uint64) *uint64 { return &n }

// show writes a request with its pointers followed, for failure messages.
func show(r rules.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{domain %q hits %d", r.Domain, r.HitsAddend)
	for _, d := range r.Descriptors {
		fmt.Fprintf(&b, " [%v", d.Entries)
		if d.Hits != nil {
			fmt.Fprintf(&b, " hits %d", *d.Hits)
		}
		if d.Limit != nil {
			fmt.Fprintf(&b, " limit %d per %v", d.Limit.RequestsPerUnit, d.Limit.Unit)
		}
		b.WriteString("]")
	}
	return b.String() + "}"
}

func TestRequest(t *testing.T) {
	override := func(unit typev3.RateLimitUnit) *rlpb.RateLimitDescriptor {
		return &rlpb.RateLimitDescriptor{
			Entries: entries("k=v"),
			Limit:   &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: unit},
		}
	}
	withOverride := func(u rules.Unit) rules.Request {
		return rules.Request{Domain: "d", Descriptors: []rules.Descriptor{{
			Entries: []rules.Entry{{Key: "k", Value: "v"}},
			Limit:   &rules.Override{RequestsPerUnit: 7, Unit: u},
		}}}
	}
	tests := []struct {
		name string
		in   *pb.RateLimitRequest
		want rules.Request
	}{
		{
			"domain, hits and entries",
			&pb.RateLimitRequest{Domain: "d", HitsAddend: 3, Descriptors: []*rlpb.RateLimitDescriptor{
				{Entries: entries("a=1", "b=2")},
				{Entries: entries("c=")},
			}},
			rules.Request{Domain: "d", HitsAddend: 3, Descriptors: []rules.Descriptor{
				{Entries: []rules.Entry{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}},
				{Entries: []rules.Entry{{Key: "c"}}},
			}},
		},
		{
			"a descriptor's own hits, 0 included",
			&pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{
				{Entries: entries("a=1"), HitsAddend: wrapperspb.UInt64(0)},
				{Entries: entries("a=1"), HitsAddend: wrapperspb.UInt64(1 << 35)},
				{Entries: entries("a=1")},
			}},
			rules.Request{Domain: "d", Descriptors: []rules.Descriptor{
				{Entries: []rules.Entry{{Key: "a", Value: "1"}}, Hits: ptr(0)},
				{Entries: []rules.Entry{{Key: "a", Value: "1"}}, Hits: ptr(1 << 35)},
				{Entries: []rules.Entry{{Key: "a", Value: "1"}}},
			}},
		},
		{
			"a descriptor without entries",
			&pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{{}}},
			rules.Request{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{}}}},
		},
		{"override per second", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{override(typev3.RateLimitUnit_SECOND)}}, withOverride(rules.UnitSecond)},
		{"override per minute", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{override(typev3.RateLimitUnit_MINUTE)}}, withOverride(rules.UnitMinute)},
		{"override per hour", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{override(typev3.RateLimitUnit_HOUR)}}, withOverride(rules.UnitHour)},
		{"override per day", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{override(typev3.RateLimitUnit_DAY)}}, withOverride(rules.UnitDay)},
		{"override per month", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{override(typev3.RateLimitUnit_MONTH)}}, withOverride(rules.UnitMonth)},
		{"override per year", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{override(typev3.RateLimitUnit_YEAR)}}, withOverride(rules.UnitYear)},
		{"override per unknown unit", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{override(typev3.RateLimitUnit_UNKNOWN)}}, withOverride(rules.UnitUnknown)},
		{"override per undefined unit", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{override(99)}}, withOverride(rules.UnitUnknown)},
		// The generated request enum names no week, but Envoy sends 7 for
		// WEEK and envoyproxy/ratelimit honours it.
		{"override per week (7)", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{override(7)}}, withOverride(rules.UnitWeek)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rls.Request(tt.in)
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %s, want %s", show(got), show(tt.want))
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	many := make([]*rlpb.RateLimitDescriptor, rules.MaxDescriptors+1)
	for i := range many {
		many[i] = &rlpb.RateLimitDescriptor{Entries: entries("a=1")}
	}
	wide := make([]string, rules.MaxEntries+1)
	for i := range wide {
		wide[i] = "k=v"
	}
	tests := []struct {
		name string
		in   *pb.RateLimitRequest
	}{
		{"a null descriptor", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: entries("a=1")}, nil}}},
		{"too many descriptors", &pb.RateLimitRequest{Domain: "d", Descriptors: many}},
		{"too many entries", &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: entries(wide...)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := rls.Request(tt.in); err == nil {
				t.Errorf("got %s and no error, want an error", show(got))
			}
		})
	}
}

func TestResponseUnits(t *testing.T) {
	tests := []struct {
		unit rules.Unit
		want pb.RateLimitResponse_RateLimit_Unit
	}{
		{rules.UnitSecond, pb.RateLimitResponse_RateLimit_SECOND},
		{rules.UnitMinute, pb.RateLimitResponse_RateLimit_MINUTE},
		{rules.UnitHour, pb.RateLimitResponse_RateLimit_HOUR},
		{rules.UnitDay, pb.RateLimitResponse_RateLimit_DAY},
		{rules.UnitWeek, pb.RateLimitResponse_RateLimit_WEEK},
		{rules.UnitMonth, pb.RateLimitResponse_RateLimit_MONTH},
		{rules.UnitYear, pb.RateLimitResponse_RateLimit_YEAR},
		{rules.UnitUnknown, pb.RateLimitResponse_RateLimit_UNKNOWN},
	}
	for _, tt := range tests {
		t.Run(tt.unit.String(), func(t *testing.T) {
			resp := &rules.Response{Code: rules.OK, Binding: -1, Statuses: []rules.Status{{
				Code: rules.OK, Remaining: 4,
				Limit: &rules.CurrentLimit{Name: "n", RequestsPerUnit: 5, Unit: tt.unit, Window: 10 * time.Second},
			}}}
			got := rls.Response(resp, header.Off).GetStatuses()[0].GetCurrentLimit()
			if got.GetUnit() != tt.want || got.GetName() != "n" || got.GetRequestsPerUnit() != 5 {
				t.Errorf("got %v, want n: 5 per %v", got, tt.want)
			}
		})
	}
}

func TestResponse(t *testing.T) {
	limit := &rules.CurrentLimit{RequestsPerUnit: 10, Unit: rules.UnitMinute, Window: time.Minute}
	resp := &rules.Response{Code: rules.OverLimit, Binding: 1, Statuses: []rules.Status{
		{Code: rules.OK}, // no limit
		{Code: rules.OverLimit, Limit: limit, ResetAfter: 1500 * time.Millisecond, RetryAfter: time.Second},
		{Code: rules.OK, Limit: limit, Remaining: 9}, // reset unknown
		{Code: rules.OK, Unlimited: true, Remaining: math.MaxUint32},
		{Code: rules.OK, Shadowed: true, Limit: limit, ResetAfter: time.Minute},
	}}
	got := rls.Response(resp, header.All)
	if got.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("overall code: got %v, want OVER_LIMIT", got.GetOverallCode())
	}
	want := []struct {
		code      pb.RateLimitResponse_Code
		limit     bool
		remaining uint32
		reset     time.Duration // 0 for none
	}{
		{pb.RateLimitResponse_OK, false, 0, 0},
		{pb.RateLimitResponse_OVER_LIMIT, true, 0, 1500 * time.Millisecond},
		{pb.RateLimitResponse_OK, true, 9, 0},
		{pb.RateLimitResponse_OK, false, math.MaxUint32, 0},
		{pb.RateLimitResponse_OK, true, 0, time.Minute},
	}
	if len(got.GetStatuses()) != len(want) {
		t.Fatalf("got %d statuses, want %d", len(got.GetStatuses()), len(want))
	}
	for i, w := range want {
		st := got.GetStatuses()[i]
		if st.GetCode() != w.code || (st.GetCurrentLimit() != nil) != w.limit || st.GetLimitRemaining() != w.remaining {
			t.Errorf("status %d: got %v, want code %v, a limit %v, remaining %d", i, st, w.code, w.limit, w.remaining)
		}
		gotReset := time.Duration(0)
		if d := st.GetDurationUntilReset(); d != nil {
			gotReset = d.AsDuration()
		}
		if gotReset != w.reset {
			t.Errorf("status %d: duration_until_reset: got %v, want %v", i, gotReset, w.reset)
		}
	}
	var names []string
	for _, h := range got.GetResponseHeadersToAdd() {
		names = append(names, h.GetKey()+": "+h.GetValue())
	}
	wantHeaders := []string{
		`RateLimit-Policy: "per_minute";q=10;w=60`,
		`RateLimit: "per_minute";r=0;t=2`,
		"X-RateLimit-Limit: 10",
		"X-RateLimit-Remaining: 0",
		"X-RateLimit-Reset: 2",
		"Retry-After: 1",
		"Content-Type: application/json",
	}
	if !slices.Equal(names, wantHeaders) {
		t.Errorf("headers: got %q, want %q", names, wantHeaders)
	}
	if got, want := string(got.GetRawBody()), `{"error":"rate_limited","message":"over the limit","retry_after":1}`; got != want {
		t.Errorf("raw_body: got %s, want %s", got, want)
	}
}

func TestResponseHeaderModes(t *testing.T) {
	limit := &rules.CurrentLimit{RequestsPerUnit: 1, Unit: rules.UnitSecond, Window: time.Second}
	over := &rules.Response{Code: rules.OverLimit, Binding: 0, Statuses: []rules.Status{
		{Code: rules.OverLimit, Limit: limit, ResetAfter: time.Second, RetryAfter: time.Second},
	}}
	noLimit := &rules.Response{Code: rules.OK, Binding: -1, Statuses: []rules.Status{{Code: rules.OK}}}
	allowed := &rules.Response{Code: rules.OK, Binding: 0, Statuses: []rules.Status{{Code: rules.OK, Limit: limit, Remaining: 1}}}
	tests := []struct {
		name string
		resp *rules.Response
		mode header.Mode
		want []string
	}{
		{"all", over, header.All, []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "Content-Type"}},
		{"ietf", over, header.IETF, []string{"RateLimit-Policy", "RateLimit", "Retry-After", "Content-Type"}},
		{"x-ratelimit", over, header.XRateLimit, []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "Content-Type"}},
		{"off adds none, Retry-After included, and no body", over, header.Off, nil},
		{"no limit applied", noLimit, header.All, nil},
		{"allowed: no body", allowed, header.All, []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := rls.Response(tt.resp, tt.mode)
			var got []string
			for _, h := range out.GetResponseHeadersToAdd() {
				got = append(got, h.GetKey())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if body, want := len(out.GetRawBody()) > 0, slices.Contains(tt.want, "Content-Type"); body != want {
				t.Errorf("raw_body %q: want one %v", out.GetRawBody(), want)
			}
		})
	}
}

const config = `domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// failing is a store that always fails with err.
type failing struct{ err error }

func (f failing) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{}, f.err
}

func (f failing) Refund(context.Context, bouncer.Request) error { return f.err }

func server(t *testing.T, lim bouncer.Limiter) *rls.Server {
	t.Helper()
	c, err := rules.Parse("c.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	e := rules.NewEngine(c, lim)
	e.RejectUnknownDomains = true
	return rls.New(e, header.All)
}

func TestShouldRateLimit(t *testing.T) {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	s := server(t, st)
	req := &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: entries("k=a")}}}
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := s.ShouldRateLimit(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() != want {
			t.Errorf("call %d: got %v, want %v", i, resp.GetOverallCode(), want)
		}
	}
}

// Every error of Decide maps to one gRPC code.
func TestShouldRateLimitErrors(t *testing.T) {
	ok := &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: entries("k=a")}}}
	tests := []struct {
		name     string
		storeErr error
		req      *pb.RateLimitRequest
		want     codes.Code
	}{
		{"store failure", errors.New("connection refused"), ok, codes.Unavailable},
		{"store deadline", fmt.Errorf("redisstore: %w", context.DeadlineExceeded), ok, codes.DeadlineExceeded},
		{"canceled", fmt.Errorf("redisstore: %w", context.Canceled), ok, codes.Canceled},
		{"invalid request", nil, &pb.RateLimitRequest{Domain: "d", HitsAddend: 1, Descriptors: []*rlpb.RateLimitDescriptor{{Entries: entries("k=a"), Limit: &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: 99}}}}, codes.InvalidArgument},
		{"null descriptor", nil, &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{nil}}, codes.InvalidArgument},
		{"unknown domain", nil, &pb.RateLimitRequest{Domain: "x", Descriptors: ok.Descriptors}, codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := server(t, failing{tt.storeErr}).ShouldRateLimit(t.Context(), tt.req)
			if got := status.Code(err); got != tt.want {
				t.Errorf("got %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

// A request without a domain or without descriptors is answered as
// envoyproxy/ratelimit answers it: Unknown, with its bare message.
func TestShouldRateLimitEmpty(t *testing.T) {
	for _, tt := range []struct {
		req  *pb.RateLimitRequest
		want string
	}{
		{&pb.RateLimitRequest{Descriptors: []*rlpb.RateLimitDescriptor{{Entries: entries("k=a")}}}, "rate limit domain must not be empty"},
		{&pb.RateLimitRequest{Domain: "d"}, "rate limit descriptor list must not be empty"},
	} {
		_, err := server(t, failing{}).ShouldRateLimit(t.Context(), tt.req)
		if st := status.Convert(err); st.Code() != codes.Unknown || st.Message() != tt.want {
			t.Errorf("%v: got %v %q, want Unknown %q", tt.req, st.Code(), st.Message(), tt.want)
		}
	}
}
