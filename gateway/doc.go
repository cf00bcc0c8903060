// Package gateway is `bouncer gateway`: a reverse proxy that matches each
// request to a route (host and longest path prefix), authenticates it (a
// JWT or an API key, package gateway/auth), decides its limits with the
// same rules and engine as `bouncer serve` (the route's descriptors are
// made of facts of the request: the verified user, the plan, the API
// key, the client IP behind trusted proxies, the route, the method, a
// header), and proxies it to the route's upstreams (package gateway/route)
// or transcodes JSON/HTTP to a gRPC upstream (package gateway/transcode).
// A request that fails authentication is answered 401 and charged to
// nobody; one over a limit gets 429 with the rate-limit headers of
// package header.
//
// Every step reads one view of the request (route.NewView: its canonical
// path, host and client), made once when the request arrives; the
// headers the gateway owns are removed from the client's request in
// every spelling and set last; and a failure is charged to whoever caused
// it. See docs/gateway.md, "Security".
package gateway
