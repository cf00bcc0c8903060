package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/internal/edge"
	"github.com/bouncerhq/bouncer/internal/recorder"
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
	routes  []Route // the config's, with what New made of each, by index in the table
	clients *clientip.Resolver
	engine  *rules.Engine
	log     *slog.Logger
	metrics *Metrics
	tracer  trace.Tracer
	maxHdr  int
	closers []func()
}

// New builds the gateway of cfg: each package it is made of checks its
// part of cfg (route.New, auth.NewJWT, auth.NewAPIKeys,
// tlsreload.Config.Validate, transcode.New), and New reports what they
// find with the file and line it came from (*ConfigError). It loads the
// routes' keys and descriptor sets, so that a config that names a file it
// cannot read fails here, before it serves.
func New(cfg *Config, o Options) (*Gateway, error) {
	g := &Gateway{cfg: cfg, routes: slices.Clone(cfg.Routes), engine: o.Engine, log: o.Logger, metrics: o.Metrics, tracer: o.Tracer, maxHdr: o.MaxHeaderBytes}
	if g.log == nil {
		g.log = slog.Default()
	}
	var ps problems
	g.resolveClients(&ps)
	checkListeners(cfg, &ps)
	auths := g.authenticators(o, &ps)
	for i := range g.routes {
		g.provision(i, auths, &ps)
	}
	g.newTable(o, &ps)
	if err := ps.err(); err != nil {
		g.Close() // what was made before the problems were found
		return nil, err
	}
	return g, nil
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
	sw := &recorder.Writer{ResponseWriter: w}
	v, pathErr := route.NewView(r, g.clients)
	entry := accessEntry{view: &v}
	var span trace.Span
	if g.tracer != nil {
		r, span = g.startSpan(r, v.Path)
	}
	defer g.end(r, sw, &entry, span, start)
	if !g.readable(sw, r, pathErr, &entry) {
		return
	}
	rt, t := g.lookup(sw, r, &v, &entry)
	if rt == nil {
		return
	}
	id, ok := g.authenticate(sw, r, rt, &entry)
	if !ok {
		return
	}
	var h *edge.Hold
	var ms metered
	if rt.Limits != nil {
		if h, ms, ok = g.limit(sw, r, rt, id, &v, &entry); !ok {
			return
		}
	}
	// What the request holds — leases, and units of rules that
	// refund_on_5xx — goes back when it ends: when the upstream has
	// answered (a WebSocket or gRPC stream, when it closes), or, for the
	// leases, as soon as the client goes away. A request that holds
	// nothing has no Hold and tracks nothing.
	// A metered request is settled at what was delivered, however its
	// answer ends.
	var aborted bool
	h.Run(func() (failed bool) {
		if rt.meter != nil {
			failed, aborted = g.serveMetered(h, ms, rt, t, sw, r, &v)
			return failed
		}
		// An answer the proxy aborted is the upstream's failure while
		// the client is there, and not when the client went away.
		aborted = serveAborting(func() { rt.serve(t, sw, r, &v) })
		return sw.Status >= 500 || aborted && r.Context().Err() == nil
	})
	if aborted {
		panic(http.ErrAbortHandler)
	}
}

// serveAborting runs serve, and reports whether it aborted its answer
// with http.ErrAbortHandler (the reverse proxy's way to cut a body
// short), which the caller raises again once the request has ended.
func serveAborting(serve func()) (aborted bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			aborted = true
		}
	}()
	serve()
	return false
}

// startSpan starts r's span, a child of the caller's trace, and passes it
// on to the upstream in r's traceparent.
func (g *Gateway) startSpan(r *http.Request, path string) (*http.Request, trace.Span) {
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := g.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", path)))
	r = r.WithContext(ctx)
	// The upstream's spans are children of the gateway's.
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(r.Header))
	return r, span
}

// end ends r's span, if it has one, and logs r's answer.
func (g *Gateway) end(r *http.Request, sw *recorder.Writer, entry *accessEntry, span trace.Span, start time.Time) {
	d := time.Since(start)
	if span != nil {
		span.SetName(r.Method + " " + entry.route)
		span.SetAttributes(attribute.String("bouncer.route", entry.route), attribute.Int("http.response.status_code", entry.status(r, sw)))
		if entry.denied != "" {
			span.SetAttributes(attribute.String("bouncer.denied", entry.denied))
		}
		span.End()
	}
	g.logAccess(r, sw, entry, d)
}

// readable refuses a request whose headers are over the bound or whose
// path is not one, and takes out the identity headers a client sent.
func (g *Gateway) readable(w http.ResponseWriter, r *http.Request, pathErr error, entry *accessEntry) bool {
	if g.maxHdr > 0 && headerBytes(r) > g.maxHdr {
		writeError(w, r, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large", fmt.Sprintf("the request's headers are over %d bytes", g.maxHdr))
		return false
	}
	if pathErr != nil {
		entry.denied = "bad_path"
		writeError(w, r, http.StatusBadRequest, "bad_path", pathErr.Error())
		return false
	}
	// The upstream trusts the identity headers; a client's own copies
	// go, in every spelling.
	route.DropHeaders(r.Header, auth.DefaultForwardPrefix)
	return true
}

// lookup finds the route of r, bounds r's body by it, and makes sure
// each header the route reads a value of comes once; it answers r and
// returns nil when r cannot go on.
func (g *Gateway) lookup(w http.ResponseWriter, r *http.Request, v *route.View, entry *accessEntry) (*Route, *route.Target) {
	t := g.table.Lookup(v)
	if t == nil {
		writeError(w, r, http.StatusNotFound, "no_route", "no route matches this request")
		return nil, nil
	}
	rt := &g.routes[t.Index]
	entry.route = rt.Name
	if r.ContentLength > rt.MaxBodyBytes {
		writeError(w, r, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body is over %d bytes", rt.MaxBodyBytes))
		return nil, nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, rt.MaxBodyBytes)
	if msg := oneSpelling(r.Header, rt.read); msg != "" {
		entry.denied = "bad_header"
		writeError(w, r, http.StatusBadRequest, "bad_header", msg)
		return nil, nil
	}
	return rt, t
}

// authenticate tells who r comes from, on a route with an authenticator,
// and answers 401 if it cannot; it takes the API key out of r, and sets
// the identity headers for the upstream.
func (g *Gateway) authenticate(w http.ResponseWriter, r *http.Request, rt *Route, entry *accessEntry) (auth.Identity, bool) {
	var id auth.Identity
	if rt.auth != nil {
		var err error
		if id, err = rt.auth.Authenticate(r); err != nil {
			// Never charged: the limits come after.
			entry.denied = "unauthenticated"
			g.log.Debug("unauthenticated", "route", rt.Name, "err", err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="bouncer"`)
			writeError(w, r, http.StatusUnauthorized, "unauthenticated", "the request's credentials are missing or invalid")
			return id, false
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
	return id, true
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

// serve proxies r to t, or transcodes it for a gRPC route.
func (rt *Route) serve(t *route.Target, w http.ResponseWriter, r *http.Request, v *route.View) {
	if rt.grpc != nil {
		rt.grpc.ServeHTTP(w, r)
		return
	}
	t.Serve(w, r, v)
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
func (e *accessEntry) status(r *http.Request, w *recorder.Writer) int {
	switch {
	case w.Status != 0:
		return w.Status
	case r.Context().Err() != nil:
		return statusClientClosed
	}
	return http.StatusOK
}

func (g *Gateway) logAccess(r *http.Request, w *recorder.Writer, e *accessEntry, d time.Duration) {
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
		slog.Int("status", status), slog.Duration("duration", d), slog.Int64("bytes", w.Bytes),
		slog.String("client_ip", e.view.Client.String()), slog.String("user", e.user), slog.String("denied", e.denied),
		slog.String("request_id", w.Header().Get("X-Request-Id")))
}
