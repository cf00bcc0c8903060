package route_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/bouncerhq/bouncer/gateway/route"
)

// Two routes: /api/users goes to the users service, without its prefix
// and below the service's base path /v1; /orders to an upstream that is
// down. Anything else has no route.
func ExampleNew() {
	users := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "users service: %s %s", r.Method, r.URL.Path)
	}))
	defer users.Close()
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + lis.Addr().String()
	lis.Close()

	table, err := route.New([]route.Route{
		{Name: "users", PathPrefix: "/api/users", StripPrefix: true, Upstreams: []string{users.URL + "/v1"}},
		{Name: "orders", PathPrefix: "/orders", Upstreams: []string{down}},
	}, route.Options{})
	if err != nil {
		panic(err)
	}
	defer table.Close()
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := route.NewView(r, nil) // the socket's peer is the client
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if t := table.Lookup(&v); t != nil {
			t.Serve(w, r, &v) // after authentication and limits
			return
		}
		http.Error(w, "no route", http.StatusNotFound)
	}))
	defer gateway.Close()

	for _, path := range []string{"/api/users/42", "/api/usersx", "/orders/7"} {
		resp, err := gateway.Client().Get(gateway.URL + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s: %d %s\n", path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	// Output:
	// /api/users/42: 200 users service: GET /v1/42
	// /api/usersx: 404 no route
	// /orders/7: 502 {"error":"bad_gateway","message":"route \"orders\": no upstream answered"}
}
