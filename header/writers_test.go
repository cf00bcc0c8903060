package header_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/grpclimit"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/jsonapi"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rls"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// This file holds every writer of rate-limit headers to one meaning per
// field: for each algorithm, the HTTP middleware, the gRPC interceptors'
// metadata, the gateway, the JSON API and the RLS service's headers to
// add answer the same sequence of requests with the same q, w, r, t,
// X-RateLimit-* and Retry-After, and on every answer r ≤ q and t ≤ w.

// said is what one answer's rate-limit fields say, whoever wrote them.
type said struct {
	q, w  int64 // RateLimit-Policy; w -1 when absent
	unit  string
	r, t  int64 // RateLimit
	xLim  int64 // X-RateLimit-Limit, -Remaining, -Reset
	xRem  int64
	xRst  int64
	retry int64 // Retry-After; -1 when absent
}

func (s said) String() string {
	return fmt.Sprintf("q=%d w=%d qu=%s r=%d t=%d X-RateLimit=%d/%d/%d Retry-After=%d", s.q, s.w, s.unit, s.r, s.t, s.xLim, s.xRem, s.xRst, s.retry)
}

// step sends n requests (1 if 0) after advancing the clock by after; want
// is what the last answer says.
type step struct {
	after time.Duration
	n     int
	want  said
}

// writer answers one request with its rate-limit fields, lower-cased
// names to values.
type writer func(t *testing.T) map[string][]string

// A writerCase builds a writer counting on a fresh store on clock.
type writerCase struct {
	name string
	// sends overrides: the limit comes with each request (RLS and the
	// JSON API only).
	overrides bool
	// build returns the writer of lim, a limit given as a rules file
	// (rulesYAML) for the writers that read one.
	build func(t *testing.T, clock *storetest.Clock, lim bouncer.Limit, rulesYAML string, o *rules.Override) writer
}

var writers = []writerCase{
	{name: "httplimit", build: httplimitWriter},
	{name: "grpclimit", build: grpclimitWriter},
	{name: "gateway", build: gatewayWriter},
	{name: "jsonapi", overrides: true, build: jsonapiWriter},
	{name: "rls", overrides: true, build: rlsWriter},
}

// A fieldCase is one limit and what its answers say.
type fieldCase struct {
	name      string
	lim       bouncer.Limit
	rulesYAML string          // the limit in a rules file; "" for plansYAML(lim)
	override  *rules.Override // given with each request instead (RLS, JSON API)
	concur    bool            // a concurrency limit: neither RLS nor the JSON API takes one
	steps     []step
}

// bucketSteps are the answers of a bucket of 10 a second, 20 deep: q is
// the burst, w the 2 s an empty bucket takes to refill.
var bucketSteps = []step{
	{want: said{q: 20, w: 2, r: 19, t: 1, retry: -1}},
	{n: 19, want: said{q: 20, w: 2, r: 0, t: 2, retry: -1}},
	{want: said{q: 20, w: 2, r: 0, t: 2, retry: 1}},
	{after: time.Second, want: said{q: 20, w: 2, r: 9, t: 2, retry: -1}}, // 10 back, 1 taken: full in 1.1 s
}

// windowSteps are the answers of a fixed window of 5 a minute, from the
// start of a window.
var windowSteps = []step{
	{want: said{q: 5, w: 60, r: 4, t: 60, retry: -1}},
	{after: 30 * time.Second, n: 4, want: said{q: 5, w: 60, r: 0, t: 30, retry: -1}},
	{want: said{q: 5, w: 60, r: 0, t: 30, retry: 30}},
}

var fieldCases = []fieldCase{
	{name: "token_bucket", lim: bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 20}, steps: bucketSteps},
	{name: "gcra", lim: bouncer.Limit{Algorithm: bouncer.GCRA, Rate: 10, Period: time.Second, Burst: 20}, steps: bucketSteps},
	{name: "leaky_bucket", lim: bouncer.Limit{Algorithm: bouncer.LeakyBucket, Rate: 10, Period: time.Second, Burst: 20}, steps: bucketSteps},
	{
		// A pro user of rate 50 a minute, burst 100: one unit refills in
		// 1.2 s, an empty bucket in 120 s.
		name: "pro plan token_bucket", lim: bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: 50, Period: time.Minute, Burst: 100},
		steps: []step{
			{want: said{q: 100, w: 120, r: 99, t: 2, retry: -1}},
			{n: 99, want: said{q: 100, w: 120, r: 0, t: 120, retry: -1}},
			{want: said{q: 100, w: 120, r: 0, t: 120, retry: 2}},
		},
	},
	{name: "fixed_window", lim: bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Minute}, steps: windowSteps},
	{
		name: "sliding_window_log", lim: bouncer.Limit{Algorithm: bouncer.SlidingWindowLog, Rate: 5, Period: time.Minute},
		steps: []step{
			{want: said{q: 5, w: 60, r: 4, t: 60, retry: -1}},
			{after: 30 * time.Second, n: 4, want: said{q: 5, w: 60, r: 0, t: 60, retry: -1}},
			{want: said{q: 5, w: 60, r: 0, t: 60, retry: 30}}, // the first unit leaves the window in 30 s
		},
	},
	{
		// The counter frees a window's units over the next window: its
		// time to be full again (up to 2 minutes) is capped at w.
		name: "sliding_window_counter", lim: bouncer.Limit{Algorithm: bouncer.SlidingWindowCounter, Rate: 5, Period: time.Minute},
		steps: []step{
			{want: said{q: 5, w: 60, r: 4, t: 60, retry: -1}},
			{after: 30 * time.Second, n: 4, want: said{q: 5, w: 60, r: 0, t: 60, retry: -1}},
			{want: said{q: 5, w: 60, r: 0, t: 60, retry: 42}}, // 12 s into the next window, 5×48/60 rounds up to 4
		},
	},
	{
		// Each request ends before the next: every answer has 2 of 3 left,
		// the lease's 30 s life as t, and no w.
		name: "concurrency", concur: true, lim: bouncer.Limit{Algorithm: bouncer.Concurrency, Rate: 3, Period: 30 * time.Second},
		steps: []step{
			{want: said{q: 3, w: -1, unit: header.ConcurrentRequests, r: 2, t: 30, retry: -1}},
			{n: 2, want: said{q: 3, w: -1, unit: header.ConcurrentRequests, r: 2, t: 30, retry: -1}},
		},
	},
	{
		name: "envoyproxy/ratelimit rule", lim: bouncer.Limit{Name: "per_minute", Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Minute},
		rulesYAML: "domain: d\ndescriptors:\n  - key: generic_key\n    value: global\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
		steps:     windowSteps,
	},
	{
		name: "override given with the request", lim: bouncer.Limit{Name: "per_minute", Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Minute},
		override: &rules.Override{RequestsPerUnit: 5, Unit: rules.UnitMinute}, steps: windowSteps,
	},
}

func TestEveryWriterSaysTheSame(t *testing.T) {
	for _, c := range fieldCases {
		t.Run(c.name, func(t *testing.T) {
			for _, w := range writers {
				switch {
				case c.override != nil && !w.overrides:
					continue // only RLS and the JSON API take a limit with the request
				case c.concur && (w.name == "jsonapi" || w.name == "rls"):
					continue // neither is told when a request ends
				case c.rulesYAML != "" && !w.overrides && w.name != "gateway":
					continue // a rules file's own format
				}
				t.Run(w.name, func(t *testing.T) {
					clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
					yaml := c.rulesYAML
					if yaml == "" {
						yaml = plansYAML(c.lim)
					}
					send := w.build(t, clock, c.lim, yaml, c.override)
					for i, s := range c.steps {
						clock.Advance(s.after)
						var got said
						for j := range max(s.n, 1) {
							got = read(t, send(t))
							checkInvariants(t, fmt.Sprintf("step %d, request %d", i, j), got)
						}
						want := s.want
						want.xLim, want.xRem, want.xRst = want.q, want.r, want.t
						if got != want {
							t.Errorf("step %d: got %v, want %v", i, got, want)
						}
					}
				})
			}
		})
	}
}

// checkInvariants checks what every answer holds to: r ≤ q, t ≤ w, and
// the X-RateLimit-* fields equal to q, r and t.
func checkInvariants(t *testing.T, at string, s said) {
	t.Helper()
	if s.r > s.q {
		t.Errorf("%s: remaining %d above the quota %d (%v)", at, s.r, s.q, s)
	}
	if s.w >= 0 && s.t > s.w {
		t.Errorf("%s: reset %d past the window %d (%v)", at, s.t, s.w, s)
	}
	if s.xLim != s.q || s.xRem != s.r || s.xRst != s.t {
		t.Errorf("%s: X-RateLimit-* %d/%d/%d, want q, r, t %d/%d/%d", at, s.xLim, s.xRem, s.xRst, s.q, s.r, s.t)
	}
}

// read parses the fields of one answer, failing t if one is missing.
func read(t *testing.T, fields map[string][]string) said {
	t.Helper()
	h := http.Header{}
	for k, vs := range fields {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	ps := header.ParsePolicies(h.Values("RateLimit-Policy"))
	its := header.ParseRateLimit(h.Values("RateLimit"))
	legacy, ok := header.ParseLegacy(h)
	if len(ps) != 1 || len(its) != 1 || !ok {
		t.Fatalf("fields %v: want one policy, one item and X-RateLimit-*", fields)
	}
	p, it := ps[0], its[0]
	if p.Name != it.Name || !it.HasRemaining || !it.HasReset {
		t.Fatalf("fields %v: the item does not name the policy, or lacks r or t", fields)
	}
	s := said{q: p.Quota, w: -1, r: it.Remaining, t: int64(it.Reset / time.Second),
		xLim: legacy.Limit, xRem: legacy.Remaining, xRst: int64(legacy.Reset / time.Second), retry: -1}
	if p.Window > 0 {
		s.w = int64(p.Window / time.Second)
	}
	if p.QuotaUnit != header.DefaultQuotaUnit {
		s.unit = p.QuotaUnit
	}
	if v := h.Get("Retry-After"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("Retry-After %q: %v", v, err)
		}
		s.retry = n
	}
	return s
}

// plansYAML is a rules file in Bouncer's format whose one rule limits
// every request, the pro plan (every caller's, by default) to lim.
func plansYAML(lim bouncer.Limit) string {
	l := fmt.Sprintf("{name: L, algorithm: %s, rate: %d, period: %s", lim.Algorithm, lim.Rate, lim.Period)
	if lim.Algorithm.UsesBurst() {
		l += fmt.Sprintf(", burst: %d", lim.Burst)
	}
	return `domain: d
plans: {key: plan, default: pro}
rules:
  - name: global
    match: [{key: generic_key, value: global}]
    limits: [{name: L, algorithm: fixed_window, rate: 1, period: 1h}]
    plans:
      pro:
        limits: [` + l + `}]
`
}

func newStore(t *testing.T, clock *storetest.Clock) *memstore.Store {
	s := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { s.Close() })
	return s
}

func engine(t *testing.T, clock *storetest.Clock, yaml string, o rules.LoadOptions) *rules.Engine {
	t.Helper()
	c, err := o.Parse("rules.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("rules: %v", err)
	}
	e := rules.NewEngine(c, newStore(t, clock))
	e.Now = clock.Now
	return e
}

// edgeLimit is lim named as the rules file names it, so that the edges'
// policy, the rule's name, is the rules' policy, the limit's name.
func edgeLimit(lim bouncer.Limit) bouncer.Limit {
	lim.Name = "L"
	return lim
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

func httplimitWriter(t *testing.T, clock *storetest.Clock, lim bouncer.Limit, _ string, _ *rules.Override) writer {
	mw, err := httplimit.Middleware(newStore(t, clock), []httplimit.Rule{{Name: "L", Limits: []bouncer.Limit{edgeLimit(lim)}}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(ok)
	return func(t *testing.T) map[string][]string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		return lower(rec.Header())
	}
}

// stream is a grpc.ServerStream that keeps the metadata it is given.
type stream struct {
	grpc.ServerStream
	ctx context.Context
	md  metadata.MD
}

func (s *stream) Context() context.Context       { return s.ctx }
func (s *stream) SetHeader(md metadata.MD) error { s.md = metadata.Join(s.md, md); return nil }
func (s *stream) SetTrailer(md metadata.MD)      { s.md = metadata.Join(s.md, md) }

func grpclimitWriter(t *testing.T, clock *storetest.Clock, lim bouncer.Limit, _ string, _ *rules.Override) writer {
	in, err := grpclimit.New(newStore(t, clock), []grpclimit.Rule{{Name: "L", Limits: []bouncer.Limit{edgeLimit(lim)}}}, grpclimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.StreamServerInfo{FullMethod: "/s.S/M"}
	return func(t *testing.T) map[string][]string {
		ss := &stream{ctx: t.Context()}
		_ = in.Stream(nil, ss, info, func(any, grpc.ServerStream) error { return nil }) // a denial's error is the answer
		return ss.md
	}
}

func gatewayWriter(t *testing.T, clock *storetest.Clock, _ bouncer.Limit, yaml string, _ *rules.Override) writer {
	upstream := httptest.NewServer(ok)
	t.Cleanup(upstream.Close)
	dir := t.TempDir()
	cfgYAML := `rules: rules.yaml
listeners: [{addr: "127.0.0.1:0"}]
routes:
  - name: all
    path_prefix: /
    upstreams: [` + upstream.URL + `]
    limits:
      domain: d
      descriptors: [[generic_key=global]]
`
	for name, data := range map[string]string{"rules.yaml": yaml, "gateway.yaml": cfgYAML} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := gateway.Load(filepath.Join(dir, "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Engine: engine(t, clock, yaml, rules.LoadOptions{AllowConcurrency: true}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return func(t *testing.T) map[string][]string {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		return lower(rec.Header())
	}
}

func jsonapiWriter(t *testing.T, clock *storetest.Clock, _ bouncer.Limit, yaml string, o *rules.Override) writer {
	h := &jsonapi.Handler{Engine: engine(t, clock, yaml, rules.LoadOptions{}), Headers: header.All}
	body := `{"domain":"d","descriptors":[{"entries":[{"key":"generic_key","value":"global"}]`
	if o != nil {
		body += fmt.Sprintf(`,"limit":{"requests_per_unit":%d,"unit":%q}`, o.RequestsPerUnit, strings.ToUpper(o.Unit.String()))
	}
	body += `}]}`
	return func(t *testing.T) map[string][]string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusTooManyRequests {
			t.Fatalf("jsonapi: %d %s", rec.Code, rec.Body)
		}
		return lower(rec.Header())
	}
}

func rlsWriter(t *testing.T, clock *storetest.Clock, _ bouncer.Limit, yaml string, o *rules.Override) writer {
	s := rls.New(engine(t, clock, yaml, rules.LoadOptions{}), header.All)
	d := &rlpb.RateLimitDescriptor{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "global"}}}
	if o != nil {
		d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: o.RequestsPerUnit, Unit: rlsUnit(t, o.Unit)}
	}
	req := &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{d}}
	return func(t *testing.T) map[string][]string {
		out, err := s.ShouldRateLimit(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string][]string{}
		for _, h := range out.ResponseHeadersToAdd {
			k := strings.ToLower(h.Key)
			m[k] = append(m[k], h.Value)
		}
		return m
	}
}

func rlsUnit(t *testing.T, u rules.Unit) typev3.RateLimitUnit {
	v, ok := typev3.RateLimitUnit_value[strings.ToUpper(u.String())]
	if !ok {
		t.Fatalf("no RLS unit for %v", u)
	}
	return typev3.RateLimitUnit(v)
}

func lower(h http.Header) map[string][]string {
	m := map[string][]string{}
	for k, vs := range h {
		m[strings.ToLower(k)] = vs
	}
	return m
}
