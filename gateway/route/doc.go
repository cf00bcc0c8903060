// Package route is the gateway's last step: it finds the route a
// request belongs to and proxies the request to one of the route's
// upstreams, over net/http/httputil.ReverseProxy.
//
// NewView reads a request's View once: its host, its canonical path and
// its client. A Table holds the routes. Lookup matches a View's host
// (exact, then "*.example.com" wildcards, then any host) and path (the
// longest PathPrefix, on whole segments) and returns a Target, whose
// Serve proxies the request:
//
//	table, err := route.New(routes, route.Options{})
//	...
//	defer table.Close()
//	http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		v, err := route.NewView(r, resolver)
//		if err != nil {
//			http.Error(w, err.Error(), http.StatusBadRequest)
//			return
//		}
//		if t := table.Lookup(&v); t != nil {
//			t.Serve(w, r, &v) // after authentication and limits
//			return
//		}
//		http.NotFound(w, r)
//	})
//
// Upstreams are http://, https:// or h2c:// (cleartext HTTP/2, for
// gRPC) URLs, chosen round robin among those that are healthy (by active
// checks, if the route has them) and not ejected (after consecutive
// failures). Idempotent requests are retried on the next upstream after
// connection errors and 502, 503 and 504 answers. WebSocket upgrades
// and gRPC calls, unary and streaming, pass through with their trailers.
//
// Failures are answered in JSON, {"error":"bad_gateway","message":...}
// (also no_healthy_upstream with Retry-After: 1, and gateway_timeout),
// or, to gRPC clients, as gRPC statuses UNAVAILABLE and
// DEADLINE_EXCEEDED. The gateway is the trust boundary: the forwarding
// headers a client sends are replaced, never appended to (see
// Target.Serve), and a failure of the client (a body that cannot be read,
// or comes too slowly) is never counted against an upstream. Every request gets a request ID, the client's if it
// sent a valid one.
//
// The package logs ejections and health changes, never requests.
package route
