package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/gateway/transcode"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/internal/edge"
	"github.com/bouncerhq/bouncer/rules"
)

// Options are what a Gateway needs besides its config.
type Options struct {
	// Engine decides the routes' limits. Required when a route has
	// limits; its config must define their domains.
	Engine *rules.Engine

	// Logger receives the access log (one line per request, at Info) and
	// the gateway's own events. Nil means slog.Default().
	Logger *slog.Logger

	// Metrics, if not nil, counts requests, latencies, denials and
	// upstream health.
	Metrics *Metrics

	// Transport, if not nil, carries the requests to HTTP upstreams
	// (tests); JWKSClient fetches JWKS URLs. Nil means the defaults.
	Transport  http.RoundTripper
	JWKSClient *http.Client

	// MaxHeaderBytes, if positive, bounds a request's line and headers:
	// a larger request is answered 431 in JSON and counted. (The server
	// in front should read up to twice as much, past which net/http
	// answers its own plain 431 before the gateway sees the request.)
	MaxHeaderBytes int

	// Tracer, if not nil, makes a span of every request, a child of the
	// caller's trace (its traceparent), and passes the span on to the
	// upstream in the request's traceparent; nil traces nothing. Take it
	// from otel.Tracer(TracerName) once a tracer provider is set up.
	Tracer trace.Tracer
}

// TracerName names the gateway's tracer.
const TracerName = "github.com/bouncerhq/bouncer/gateway"

// Gateway is the front door: it matches a request to a route,
// authenticates it, decides its limits, and proxies it (or transcodes it
// to gRPC). It is an http.Handler, safe for concurrent use; a config
// reload builds a new Gateway and swaps it in.
type Gateway struct {
	cfg     *Config
	table   *route.Table
	routes  map[string]*runtimeRoute
	clients *clientip.Resolver
	engine  *rules.Engine
	log     *slog.Logger
	metrics *Metrics
	tracer  trace.Tracer
	maxHdr  int
	closers []func()
}

type runtimeRoute struct {
	cfg  *Route
	auth auth.Authenticator
	// keyHeader and keyQuery are where an API key may come; both are
	// taken out before proxying ("" for routes without API keys).
	keyHeader, keyQuery string
	// read are the headers the gateway reads a value of on this route:
	// those the limits count by, and a JWT's; each must come once, in
	// one spelling (see oneSpelling).
	read []string
	grpc http.Handler // a transcoding route's handler; nil for a proxy
}

// New builds the gateway of cfg. It loads the routes' keys and descriptor
// sets, so that a config that names a file it cannot read fails here,
// before it serves.
func New(cfg *Config, o Options) (g *Gateway, err error) {
	g = &Gateway{cfg: cfg, routes: map[string]*runtimeRoute{}, engine: o.Engine, log: o.Logger, metrics: o.Metrics, tracer: o.Tracer, maxHdr: o.MaxHeaderBytes}
	if g.log == nil {
		g.log = slog.Default()
	}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	prefixes, err := clientip.ParsePrefixes(cfg.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("gateway: %s: trusted_proxies: %w", cfg.File, err)
	}
	g.clients = &clientip.Resolver{TrustedProxies: prefixes, Header: cfg.ForwardedBy}
	if err := g.clients.Validate(); err != nil {
		return nil, fmt.Errorf("gateway: %s: %w", cfg.File, err)
	}
	auths := map[string]auth.Authenticator{}
	for name, a := range cfg.Auth {
		at := fmt.Sprintf("%s:%d: auth.%s", cfg.File, a.Line, name)
		switch {
		case a.JWT != nil:
			jc := auth.JWTConfig{Name: name, Issuer: a.JWT.Issuer, Audience: a.JWT.Audience, Skew: a.JWT.Skew,
				SubjectClaim: a.JWT.SubjectClaim, PlanClaim: a.JWT.PlanClaim, MaxTokenBytes: a.JWT.MaxTokenBytes, Header: a.JWT.Header}
			for _, k := range a.JWT.Keys {
				jc.Keys = append(jc.Keys, auth.KeySource{File: k.File, JWKSFile: k.JWKSFile, JWKSURL: k.JWKSURL, KeyID: k.KeyID, Algorithms: k.Algorithms})
			}
			j, err := auth.NewJWT(jc, auth.Options{HTTPClient: o.JWKSClient, Logger: g.log})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			g.closers = append(g.closers, j.Close)
			auths[name] = j
		case a.APIKeys != nil:
			kc := auth.APIKeyConfig{Name: name, Header: a.APIKeys.Header, Query: a.APIKeys.Query}
			for _, k := range a.APIKeys.Keys {
				kc.Keys = append(kc.Keys, auth.APIKey{ID: k.ID, Hash: k.Hash, Plan: k.Plan})
			}
			ak, err := auth.NewAPIKeys(kc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			auths[name] = ak
		}
	}
	var routes []route.Route
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		at := fmt.Sprintf("%s:%d: route %s", cfg.File, r.Line, r.Name)
		rr := &runtimeRoute{cfg: r, auth: auths[r.Auth]}
		if a, ok := cfg.Auth[r.Auth]; ok && a.APIKeys != nil {
			rr.keyHeader, rr.keyQuery = cmp.Or(a.APIKeys.Header, auth.DefaultAPIKeyHeader), a.APIKeys.Query
		} else if ok && a.JWT != nil {
			rr.read = append(rr.read, http.CanonicalHeaderKey(cmp.Or(a.JWT.Header, "Authorization")))
		}
		if r.Limits != nil {
			for _, d := range r.Limits.Descriptors {
				for _, e := range d {
					if h, ok := strings.CutPrefix(e.Fact, "header:"); ok {
						rr.read = append(rr.read, http.CanonicalHeaderKey(h))
					}
				}
			}
			if g.engine == nil {
				return nil, fmt.Errorf("%s: limits need a rules engine", at)
			}
			if g.engine.Config().Domain(r.Limits.Domain) == nil {
				return nil, fmt.Errorf("%s: limits.domain: the rules define no domain %q", at, r.Limits.Domain)
			}
		}
		rt := route.Route{Name: r.Name, Host: r.Host, PathPrefix: r.PathPrefix, StripPrefix: r.StripPrefix,
			Upstreams: r.Upstreams, Timeout: r.Timeout, Retries: r.Retries}
		if h := r.Health; h != nil {
			rt.Health = &route.HealthCheck{Path: h.Path, Interval: h.Interval, Timeout: h.Timeout, Healthy: h.Healthy, Unhealthy: h.Unhealthy}
		}
		if r.GRPC != nil {
			rt.Upstreams = []string{r.GRPC.Upstream}
			h, closeConn, err := g.transcoder(r)
			if err != nil {
				return nil, fmt.Errorf("%s: grpc: %w", at, err)
			}
			g.closers = append(g.closers, closeConn)
			rr.grpc = h
		}
		g.routes[r.Name] = rr
		routes = append(routes, rt)
	}
	ro := route.Options{Logger: g.log, Transport: o.Transport}
	if g.metrics != nil {
		ro.OnUpstream = g.metrics.upstream
	}
	g.table, err = route.New(routes, ro)
	if err != nil {
		return nil, fmt.Errorf("gateway: %s: %w", cfg.File, err)
	}
	return g, nil
}

// transcoder connects to a gRPC route's upstream and returns its
// transcoding handler.
func (g *Gateway) transcoder(r *Route) (http.Handler, func(), error) {
	creds := insecure.NewCredentials()
	target := strings.TrimPrefix(r.GRPC.Upstream, "h2c://")
	if t, ok := strings.CutPrefix(r.GRPC.Upstream, "https://"); ok {
		creds, target = credentials.NewTLS(nil), t
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, err
	}
	h, err := transcode.New(transcode.Options{DescriptorSet: r.GRPC.DescriptorSet, Services: r.GRPC.Services, Conn: conn,
		Timeout: r.Timeout, MaxBodyBytes: r.MaxBodyBytes, Logger: g.log})
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return h, func() { conn.Close() }, nil
}

// Close stops the gateway's health checks, key refreshers and gRPC
// connections. Requests in flight finish.
func (g *Gateway) Close() {
	if g.table != nil {
		g.table.Close()
	}
	for _, c := range g.closers {
		c()
	}
}

// Config returns the config the gateway serves.
func (g *Gateway) Config() *Config { return g.cfg }

// Health reports the upstreams' health, for the admin listener.
func (g *Gateway) Health() []route.UpstreamHealth { return g.table.Health() }

// ServeHTTP serves r: it reads r's View (route.NewView), finds its
// route, authenticates it, decides its limits and proxies it; each step
// reads the View, never the raw request, and every answer is logged.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	v, pathErr := route.NewView(r, g.clients)
	entry := accessEntry{view: &v}
	var span trace.Span
	if g.tracer != nil {
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span = g.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", v.Path)))
		r = r.WithContext(ctx)
		// The upstream's spans are children of the gateway's.
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	defer func() {
		d := time.Since(start)
		if span != nil {
			span.SetName(r.Method + " " + entry.route)
			span.SetAttributes(attribute.String("bouncer.route", entry.route), attribute.Int("http.response.status_code", entry.status(r, sw)))
			if entry.denied != "" {
				span.SetAttributes(attribute.String("bouncer.denied", entry.denied))
			}
			span.End()
		}
		g.logAccess(r, sw, &entry, d)
	}()
	if g.maxHdr > 0 && headerBytes(r) > g.maxHdr {
		writeError(sw, r, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large", fmt.Sprintf("the request's headers are over %d bytes", g.maxHdr))
		return
	}
	if pathErr != nil {
		entry.denied = "bad_path"
		writeError(sw, r, http.StatusBadRequest, "bad_path", pathErr.Error())
		return
	}
	// The upstream trusts the identity headers; a client's own copies
	// go, in every spelling.
	route.DropHeaders(r.Header, auth.DefaultForwardPrefix)
	rt0 := g.table.Lookup(&v)
	if rt0 == nil {
		writeError(sw, r, http.StatusNotFound, "no_route", "no route matches this request")
		return
	}
	t := target{rt0}
	rt := g.routes[t.Route.Name]
	entry.route = rt.cfg.Name
	if r.ContentLength > rt.cfg.MaxBodyBytes {
		writeError(sw, r, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body is over %d bytes", rt.cfg.MaxBodyBytes))
		return
	}
	r.Body = http.MaxBytesReader(sw, r.Body, rt.cfg.MaxBodyBytes)
	if msg := oneSpelling(r.Header, rt.read); msg != "" {
		entry.denied = "bad_header"
		writeError(sw, r, http.StatusBadRequest, "bad_header", msg)
		return
	}

	var id auth.Identity
	if rt.auth != nil {
		var err error
		if id, err = rt.auth.Authenticate(r); err != nil {
			// Never charged: the limits come after.
			entry.denied = "unauthenticated"
			g.log.Debug("unauthenticated", "route", rt.cfg.Name, "err", err)
			sw.Header().Set("WWW-Authenticate", `Bearer realm="bouncer"`)
			writeError(sw, r, http.StatusUnauthorized, "unauthenticated", "the request's credentials are missing or invalid")
			return
		}
		entry.user = id.Subject
	}
	if rt.keyHeader != "" {
		// The key is the caller's secret: the upstream gets it from
		// neither place.
		route.DropHeaders(r.Header, rt.keyHeader)
		if rt.keyQuery != "" && r.URL.RawQuery != "" {
			// Rebuilt from what the gateway parsed, so that no spelling
			// it could not read (a ';' separator) carries a key along.
			q := r.URL.Query()
			q.Del(rt.keyQuery)
			r.URL.RawQuery = q.Encode()
		}
	}
	auth.ForwardHeaders(r.Header, id, "")

	var h *edge.Hold
	if rt.cfg.Limits != nil {
		var ok bool
		if h, ok = g.limit(sw, r, rt, id, &v, &entry); !ok {
			return
		}
	}
	// What the request holds — leases, and units of rules that
	// refund_on_5xx — goes back when it ends: when the upstream has
	// answered (a WebSocket or gRPC stream, when it closes), or, for the
	// leases, as soon as the client goes away. A request that holds
	// nothing has no Hold and tracks nothing.
	h.Run(func() bool {
		t.serve(rt, sw, r, &v)
		return sw.status >= 500
	})
}

// oneSpelling makes sure each header in names, which the gateway reads,
// has one value in one spelling: it drops the spellings with '_' (the
// gateway reads the header as named, an upstream may read either), and
// reports a header sent more than once, whose values the gateway and an
// upstream could read apart.
func oneSpelling(h http.Header, names []string) string {
	for _, name := range names {
		vs := h[name]
		delete(h, name)
		route.DropHeaders(h, name)
		if len(vs) > 0 {
			h[name] = vs
		}
		if len(vs) > 1 {
			return fmt.Sprintf("the header %s, which the gateway reads, is sent %d times", name, len(vs))
		}
	}
	return ""
}

// serve proxies r, or transcodes it for a gRPC route.
func (t target) serve(rt *runtimeRoute, w http.ResponseWriter, r *http.Request, v *route.View) {
	if rt.grpc != nil {
		rt.grpc.ServeHTTP(w, r)
		return
	}
	t.Serve(w, r, v)
}

type target struct{ *route.Target }

// admitted is what Decide charged an admitted request, which its Hold
// gives back through the engine.
type admitted struct {
	edge.Hold
	engine *rules.Engine
	log    *slog.Logger
	resp   rules.Response
}

// hold returns the Hold of resp, for ctx's request: it holds leases and
// units given back on failure if resp charged any.
func (g *Gateway) hold(ctx context.Context, resp *rules.Response) *edge.Hold {
	a := &admitted{engine: g.engine, log: g.log, resp: *resp}
	a.Init(ctx, a)
	a.Leases, a.Refunds = resp.Holds(lease), resp.Holds(onFailure)
	return &a.Hold
}

// GiveBack gives back p of what Decide charged. The Hold calls it one
// Part at a time (Engine.Refund is not safe on one Response at once).
func (a *admitted) GiveBack(ctx context.Context, p edge.Part) {
	only := lease
	switch p {
	case edge.Failed:
		only = onFailure
	case edge.Unserved:
		only = nil // everything
	}
	if err := a.engine.Refund(context.WithoutCancel(ctx), &a.resp, only); err != nil {
		a.log.Warn("refund failed", "err", err)
	}
}

// lease selects the concurrency leases a request holds until it ends.
func lease(_ *rules.Rule, l bouncer.Limit) bool { return l.Algorithm == bouncer.Concurrency }

// onFailure selects the units of the rules that refund_on_5xx.
func onFailure(r *rules.Rule, _ bouncer.Limit) bool { return r != nil && r.RefundOn5xx }

// limit decides r's limits, holds r for a shaping delay, and answers a
// request it refuses. ok is false when r is not to go on; h, when r
// holds leases or units given back on failure, is what gives them back.
func (g *Gateway) limit(w http.ResponseWriter, r *http.Request, rt *runtimeRoute, id auth.Identity, view *route.View, entry *accessEntry) (h *edge.Hold, ok bool) {
	req, tooLong := g.descriptors(r, rt, id, view)
	if tooLong != nil {
		// The client's value, not an outage: a 4xx, logged at debug.
		entry.denied = tooLong.code
		g.log.Debug("a limited value is too long", "route", rt.cfg.Name, "fact", tooLong.fact, "bytes", tooLong.n)
		writeError(w, r, tooLong.status, tooLong.code, fmt.Sprintf("the request's %s is over %d bytes", tooLong.what, rules.MaxValueLen))
		return nil, false
	}
	if len(req.Descriptors) == 0 {
		return nil, true
	}
	resp, err := g.engine.Decide(r.Context(), req)
	if err != nil {
		if r.Context().Err() == nil {
			g.log.Error("limits not decided", "route", rt.cfg.Name, "err", err)
			writeError(w, r, http.StatusServiceUnavailable, "limiter_unavailable", "the rate limiter could not decide this request")
		}
		return nil, false
	}
	if resp.Degraded() {
		w.Header().Set(rules.DegradedHeader, "true")
	}
	d := resp.Delay()
	if d > 0 || resp.Holds(heldUntilEnd) {
		h = g.hold(r.Context(), &resp)
	}
	v, hasValues := resp.Values()
	if resp.Code == rules.OverLimit {
		h.Done(false) // a shadow rule's leases
		g.deny(w, r, rt, entry, v, resp.DenialMessage())
		return nil, false
	}
	if d > 0 {
		// A shaping rule: the request leaves at its turn, or not at all.
		over, err := h.Wait(d, maxDelay)
		if err != nil {
			return nil, false
		}
		if over > 0 {
			v.Denied, v.RetryAfter = true, over
			g.deny(w, r, rt, entry, v, resp.DenialMessage())
			return nil, false
		}
	}
	if hasValues {
		v.Set(w.Header(), header.All)
	}
	if h != nil && !h.Leases && !h.Refunds {
		h = nil
	}
	return h, true
}

// heldUntilEnd selects what a request holds until it ends: concurrency
// leases, and the units of rules that refund_on_5xx.
func heldUntilEnd(r *rules.Rule, l bouncer.Limit) bool { return lease(r, l) || onFailure(r, l) }

// maxDelay is the longest a shaping rule holds a request; one that would
// wait longer is refused, with a Retry-After of the excess.
const maxDelay = time.Second

// deny answers a request over a limit: 429 with the rate-limit fields and
// a JSON body, or RESOURCE_EXHAUSTED to a gRPC client.
func (g *Gateway) deny(w http.ResponseWriter, r *http.Request, rt *runtimeRoute, entry *accessEntry, v header.Values, message string) {
	entry.denied = "rate_limited"
	if g.metrics != nil {
		g.metrics.denied(rt.cfg.Name, v.Policy)
	}
	if isGRPC(r) {
		v.Set(w.Header(), header.All)
		writeError(w, r, http.StatusTooManyRequests, "rate_limited", message)
		return
	}
	header.WriteDenied(w, r, v, header.All, message)
}

// tooLong is a limited value over rules.MaxValueLen: the client's
// mistake, answered with status.
type tooLong struct {
	fact, what, code string
	status, n        int
}

// descriptors are r's descriptors under rt's limits: those whose every
// fact r has a value for, each with the caller's plan when the domain
// has plans. A value over rules.MaxValueLen is reported instead.
func (g *Gateway) descriptors(r *http.Request, rt *runtimeRoute, id auth.Identity, v *route.View) (rules.Request, *tooLong) {
	l := rt.cfg.Limits
	req := rules.Request{Domain: l.Domain}
	planKey := ""
	if d := g.engine.Config().Domain(l.Domain); d != nil {
		planKey = d.PlanKey
	}
	var clientIP string
	for _, d := range l.Descriptors {
		entries := make([]rules.Entry, 0, len(d)+1)
		for _, e := range d {
			val := e.Value
			if e.Fact != "" {
				if e.Fact == "client_ip" && clientIP == "" && v.Client.IsValid() {
					clientIP = v.Client.String()
				}
				val = fact(e.Fact, r, rt, id, v, clientIP)
				if len(val) > rules.MaxValueLen {
					if e.Fact == "path" {
						return req, &tooLong{e.Fact, "path", "uri_too_long", http.StatusRequestURITooLong, len(val)}
					}
					return req, &tooLong{e.Fact, e.Fact, "header_too_large", http.StatusRequestHeaderFieldsTooLarge, len(val)}
				}
			}
			if val == "" {
				entries = nil
				break
			}
			entries = append(entries, rules.Entry{Key: e.Key, Value: val})
		}
		if entries == nil {
			continue
		}
		if planKey != "" && id.Plan != "" {
			entries = append(entries, rules.Entry{Key: planKey, Value: id.Plan})
		}
		req.Descriptors = append(req.Descriptors, rules.Descriptor{Entries: entries})
	}
	return req, nil
}

// fact is the value of a descriptor fact for r, or "" if r has none.
func fact(name string, r *http.Request, rt *runtimeRoute, id auth.Identity, v *route.View, clientIP string) string {
	switch name {
	case "user_id":
		return id.Subject
	case "plan":
		return id.Plan
	case "api_key":
		if id.Method == "api_key" {
			return id.KeyID
		}
		return ""
	case "client_ip":
		return clientIP
	case "route":
		return rt.cfg.Name
	case "method":
		return r.Method
	case "path":
		return v.Path
	}
	if h, ok := strings.CutPrefix(name, "header:"); ok {
		return r.Header.Get(h)
	}
	return ""
}

// writeError answers a JSON error: {"error": code, "message": message};
// or, to a gRPC client, the gRPC status that stands for status, with the
// message, in a response of headers alone (gRPC's Trailers-Only).
func writeError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	h := w.Header()
	if isGRPC(r) {
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", strconv.Itoa(grpcCodes[status]))
		h.Set("Grpc-Message", url.PathEscape(message))
		w.WriteHeader(http.StatusOK)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{code, message})
}

// grpcCodes are the gRPC codes of the gateway's own answers.
var grpcCodes = map[int]int{
	http.StatusNotFound:                    12, // UNIMPLEMENTED: no such method here
	http.StatusRequestEntityTooLarge:       8,  // RESOURCE_EXHAUSTED
	http.StatusUnauthorized:                16, // UNAUTHENTICATED
	http.StatusTooManyRequests:             8,  // RESOURCE_EXHAUSTED
	http.StatusServiceUnavailable:          14, // UNAVAILABLE
	http.StatusRequestHeaderFieldsTooLarge: 8,  // RESOURCE_EXHAUSTED
}

// headerBytes is about how many bytes r's line and headers took.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + len(r.Host) + 16
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// isGRPC reports whether r is a gRPC call.
func isGRPC(r *http.Request) bool {
	return r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

// accessEntry is what the access log says of a request beyond the
// request itself.
type accessEntry struct {
	route, user, denied string
	view                *route.View
}

// statusClientClosed is what the access log and the metrics say of a
// request whose client went away before anything was answered (nginx's
// 499): nothing was sent.
const statusClientClosed = 499

// status is the status r was answered with.
func (e *accessEntry) status(r *http.Request, w *statusWriter) int {
	switch {
	case w.status != 0:
		return w.status
	case r.Context().Err() != nil:
		return statusClientClosed
	}
	return http.StatusOK
}

func (g *Gateway) logAccess(r *http.Request, w *statusWriter, e *accessEntry, d time.Duration) {
	status := e.status(r, w)
	if g.metrics != nil {
		g.metrics.request(e.route, status, d)
	}
	p := e.view.Path
	if p == "" {
		p = r.URL.EscapedPath() // refused, or not a path
	}
	g.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("method", r.Method), slog.String("path", p), slog.String("route", e.route),
		slog.Int("status", status), slog.Duration("duration", d), slog.Int64("bytes", w.bytes),
		slog.String("client_ip", e.view.Client.String()), slog.String("user", e.user), slog.String("denied", e.denied),
		slog.String("request_id", w.Header().Get("X-Request-Id")))
}

// statusWriter records the status and size of an answer. Unwrap lets
// http.ResponseController reach the connection (flushes for streaming
// and gRPC, hijacking for WebSocket upgrades).
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
