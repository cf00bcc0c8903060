package route

import (
	"context"
	"net/http"
	"net/http/httputil"
	"strings"

	"github.com/bouncerhq/bouncer/internal/urlpath"
)

// Target is where a request goes: a route and its upstreams. Table.Lookup
// returns it; its Serve proxies the request. It is safe for
// concurrent use.
type Target struct {
	// Route is the route as given to New. It must not be changed.
	Route *Route
	// Index is the route's index in the routes given to New.
	Index int

	entry *entry
}

// exchange is what the proxy's hooks share about one request.
type exchange struct {
	id   string // the request ID
	grpc bool
	view *View
	body *clientBody // nil for a request without a body
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	if x == nil {
		return &exchange{view: &View{}}
	}
	return x
}

// Serve proxies r, whose View is v (NewView made it, and Lookup chose t
// with it), to the route's upstreams, as the Route's fields say, and
// writes the answer to w: the upstream's, or a JSON error (502
// bad_gateway, 503 no_healthy_upstream, 504 gateway_timeout; for a
// failure of the client, 400 bad_request, 408 request_timeout or 413
// body_too_large) or, for a gRPC request, the matching gRPC status. If
// the client goes away, nothing is written.
//
// The request sent upstream has the upstream's Host, v's Path (stripped
// and below the upstream's base path, if so configured), no hop-by-hop
// headers (Connection and the headers it names, Keep-Alive, Proxy-*, TE
// except "trailers", Trailer, Transfer-Encoding, and Upgrade except for
// an upgrade), and the request ID.
//
// Failures are charged to whoever caused them: a request body that
// cannot be read (malformed chunked encoding, a client that stalls or
// goes away, more than the bound http.MaxBytesReader set) is the
// client's, never counted against the upstream's health; only the
// upstream's errors, timeouts and 5xx answers are.
//
// Security: the gateway is the trust boundary. Forwarding headers the
// client sent are dropped by NewView, not appended to, and
// X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto and an RFC 7239
// Forwarded header (for=client;host=...;proto=...) are set from v: the
// client is v.Client, the address the limits counted.
func (t *Target) Serve(w http.ResponseWriter, r *http.Request, v *View) {
	e := t.entry
	x := &exchange{id: requestID(r.Header.Get(e.table.idHeader)), grpc: isGRPC(r.Header), view: v}
	if r.Body != nil && r.Body != http.NoBody {
		x.body = &clientBody{ReadCloser: r.Body}
		r.Body = x.body
	}
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
	DropHeaders(h, e.table.idHeader) // its spellings with '_' too
	h.Set(e.table.idHeader, x.id)
	client := ""
	if c := x.view.Client; c.IsValid() {
		client = c.String()
		h.Set("X-Forwarded-For", client)
	}
	h.Set("X-Forwarded-Host", pr.In.Host)
	proto := "http"
	if pr.In.TLS != nil {
		proto = "https"
	}
	h.Set("X-Forwarded-Proto", proto)
	h.Set("Forwarded", forwarded(client, x.view.Client.Is6(), pr.In.Host, proto))
	pr.Out.Host = "" // the upstream's
	pr.Out.URL.RawPath = e.outPath(x.view.Path)
	pr.Out.URL.Path = urlpath.Decode(pr.Out.URL.RawPath)
}

// outPath is the escaped path to send for the canonical path p, before
// the upstream's base: p, stripped of the prefix if the route says so.
func (e *entry) outPath(p string) string {
	if !e.route.StripPrefix || !urlpath.HasPrefix(p, e.route.PathPrefix) {
		return p // the latter only if the caller skipped Lookup
	}
	return stripPrefix(p, e.route.PathPrefix)
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
