package route

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strings"
)

// Target is where a request goes: a route and its upstreams. Table.Lookup
// returns it; its ServeHTTP proxies the request. It is safe for
// concurrent use.
type Target struct {
	// Route is the route as given to New. It must not be changed.
	Route *Route

	entry *entry
}

// exchange is what the proxy's hooks share about one request.
type exchange struct {
	id   string // the request ID
	grpc bool
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	if x == nil {
		return &exchange{}
	}
	return x
}

// ServeHTTP proxies r to the route's upstreams, as the Route's fields
// say, and writes the answer to w: the upstream's, or a JSON error (502
// bad_gateway, 503 no_healthy_upstream, 504 gateway_timeout) or, for a
// gRPC request, the gRPC status UNAVAILABLE or DEADLINE_EXCEEDED. If the
// client goes away, nothing is written.
//
// The request sent upstream has the upstream's Host, the route's path
// (stripped and below the upstream's base path, if so configured), no
// hop-by-hop headers (Connection and the headers it names, Keep-Alive,
// Proxy-*, TE except "trailers", Trailer, Transfer-Encoding, and Upgrade
// except for an upgrade), and the request ID.
//
// Security: the gateway is the trust boundary. Forwarding headers the
// client sent (Forwarded, X-Real-Ip and every X-Forwarded-* header) are
// dropped, not appended to, and X-Forwarded-For, X-Forwarded-Host,
// X-Forwarded-Proto and an RFC 7239 Forwarded header
// (for=client;host=...;proto=...) are set from the connection: the
// client's address is the socket's peer, and the gateway must not sit
// behind another proxy whose view upstreams need.
func (t *Target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := t.entry
	x := &exchange{id: requestID(r.Header.Get(e.table.idHeader)), grpc: isGRPC(r.Header)}
	r = r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x))
	if x.grpc {
		e.stream.ServeHTTP(w, r)
		return
	}
	e.plain.ServeHTTP(w, r)
}

// rewrite is the reverse proxy's Rewrite. It leaves the URL's scheme and
// host for RoundTrip, which picks the upstream of each attempt.
func (e *entry) rewrite(pr *httputil.ProxyRequest) {
	x := exchangeOf(pr.In.Context())
	h := pr.Out.Header
	for k := range h {
		if strings.HasPrefix(textproto.CanonicalMIMEHeaderKey(k), "X-Forwarded-") {
			delete(h, k)
		}
	}
	h.Del("X-Real-Ip")
	pr.SetXForwarded()
	h.Set("Forwarded", forwarded(pr.In))
	h.Set(e.table.idHeader, x.id)
	pr.Out.Host = "" // the upstream's
	pr.Out.URL.Path, pr.Out.URL.RawPath = e.outPath(pr.In)
}

// outPath is the path to send for in, before the upstream's base: the
// cleaned path, stripped of the prefix if the route says so. The escaped
// form the client sent is kept when cleaning changed nothing and the
// prefix can be stripped from it.
func (e *entry) outPath(in *http.Request) (p, raw string) {
	p = cleanPath(in.URL.Path)
	if p == in.URL.Path {
		raw = in.URL.RawPath
	}
	if !e.route.StripPrefix || !hasPathPrefix(p, e.route.PathPrefix) {
		return p, raw // the latter only if the caller skipped Lookup
	}
	p = stripPrefix(p, e.route.PathPrefix)
	if raw != "" {
		if escaped := in.URL.EscapedPath(); hasPathPrefix(escaped, e.route.PathPrefix) {
			raw = stripPrefix(escaped, e.route.PathPrefix)
		} else {
			raw = ""
		}
	}
	return p, raw
}

// modifyResponse is the reverse proxy's ModifyResponse.
func (e *entry) modifyResponse(resp *http.Response) error {
	x := exchangeOf(resp.Request.Context())
	if x.grpc && resp.Header.Get("Grpc-Status") != "" {
		trailersOnly(resp)
	}
	resp.Header.Set(e.table.idHeader, x.id)
	return nil
}

// trailersOnly turns a gRPC Trailers-Only answer (one HEADERS frame
// holding the status, as gRPC servers send errors) into headers and
// announced trailers. The reverse proxy flushes streaming answers'
// headers as soon as it has them, so it could send the status as
// headers followed by an end of stream without trailers, which gRPC
// clients refuse ("server closed the stream without sending trailers").
func trailersOnly(resp *http.Response) {
	if resp.Trailer == nil {
		resp.Trailer = make(http.Header, len(resp.Header))
	}
	for k, v := range resp.Header {
		if k != "Content-Type" {
			resp.Trailer[k] = v
			delete(resp.Header, k)
		}
	}
}

// isGRPC reports whether a request's content type is gRPC's
// (application/grpc, application/grpc+proto, ...), not gRPC-Web's.
func isGRPC(h http.Header) bool {
	ct, ok := strings.CutPrefix(h.Get("Content-Type"), "application/grpc")
	return ok && (ct == "" || ct[0] == '+' || ct[0] == ';')
}
