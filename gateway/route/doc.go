// Package route is the gateway's last step: it finds the route a
// request belongs to and proxies the request to one of the route's
// upstreams, over net/http/httputil.ReverseProxy.
//
// A Table holds the routes. Lookup matches a request's host (exact,
// then "*.example.com" wildcards, then any host) and its cleaned path
// (the longest PathPrefix, on whole segments) and returns a Target,
// whose ServeHTTP proxies the request:
//
//	table, err := route.New(routes, route.Options{})
//	...
//	defer table.Close()
//	http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		if t := table.Lookup(r); t != nil {
//			t.ServeHTTP(w, r) // after authentication and limits
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
// Target.ServeHTTP). Every request gets a request ID, the client's if it
// sent a valid one.
//
// The package logs ejections and health changes, never requests.
package route
