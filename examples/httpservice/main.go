// Httpservice is a small HTTP service limited by httplimit: each client
// address may make 5 requests a second (bursts of 10) and 1000 a day, a
// caller with an API key 20 a second on top, and /healthz is never
// limited. It listens on 127.0.0.1:8092 (or -addr), a port the
// README's tour leaves free.
//
//	go run ./examples/httpservice
//	curl -i localhost:8092/hello
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/memstore"
)

// defaultAddr is where the service listens without -addr.
const defaultAddr = "127.0.0.1:8092"

func main() {
	addr := flag.String("addr", defaultAddr, "address to listen on")
	flag.Parse()
	store := memstore.New(memstore.Options{})
	defer store.Close()
	h, err := handler(store)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("httpservice: listening on %s", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt)
		<-stop
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// handler is the service: its routes behind the limits, on lim.
func handler(lim bouncer.Limiter) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	limit, err := httplimit.Middleware(lim, []httplimit.Rule{
		{Name: "per_ip", Key: httplimit.IP(nil), Limits: []bouncer.Limit{
			{Name: "second", Algorithm: bouncer.TokenBucket, Rate: 5, Period: time.Second, Burst: 10},
			{Name: "day", Algorithm: bouncer.FixedWindow, Rate: 1000, Period: 24 * time.Hour},
		}},
		{Name: "per_key", Key: httplimit.APIKey("X-API-Key", "api_key"), Limits: []bouncer.Limit{
			{Name: "second", Algorithm: bouncer.GCRA, Rate: 20, Period: time.Second, Burst: 20},
		}},
	}, httplimit.Options{Exclude: httplimit.ExcludePaths("/healthz")})
	if err != nil {
		return nil, fmt.Errorf("httpservice: %w", err)
	}
	return limit(mux), nil
}
