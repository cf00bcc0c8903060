package httpretry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/bouncerhq/bouncer/httpretry"
)

func Example() {
	// A server that refuses the first request and asks for a second's wait.
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &httpretry.Transport{
		// Leave Base nil to send through http.DefaultTransport.
		Base: srv.Client().Transport,
		// A Sleep that only reports keeps the example fast; leave Sleep
		// nil to wait.
		Sleep: func(ctx context.Context, d time.Duration) error {
			fmt.Println("waiting", d)
			return nil
		},
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.Status, ": ", string(body))
	// Output:
	// waiting 1s
	// 200 OK: hello
}

func ExampleTransport_pace() {
	// A server whose quota is spent for the next 3 seconds after each
	// request.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit", `"default";r=0;t=3`)
	}))
	defer srv.Close()

	// A clock that moves only when the Transport sleeps keeps the example
	// fast; leave Now and Sleep nil for the real ones.
	now := time.Now()
	client := &http.Client{Transport: &httpretry.Transport{
		Base: srv.Client().Transport,
		Pace: true,
		Now:  func() time.Time { return now },
		Sleep: func(ctx context.Context, d time.Duration) error {
			fmt.Println("waiting", d)
			now = now.Add(d)
			return nil
		},
	}}
	for range 2 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	// Output:
	// 200 OK
	// waiting 3s
	// 200 OK
}
