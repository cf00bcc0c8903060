// Gateway is the upstream of the example gateway (gateway.yaml): an HTTP
// service on 127.0.0.1:9001 that says who the gateway let through. It
// also prints a demo token for a user, signed with the example's demo
// key, and the requests to try.
//
//	go run ./examples/gateway                 # the upstream; prints a token for alice
//	go run ./examples/gateway -token bob -plan pro   # prints a token and exits
//	go run ./cmd/bouncer gateway --config examples/gateway/gateway.yaml
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
	"path/filepath"
	"runtime"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9001", "the upstream's address")
	user := flag.String("token", "", "print a demo token for this user and exit")
	plan := flag.String("plan", "", "the plan claim of -token's token")
	flag.Parse()
	if *user != "" {
		t, err := demoToken(*user, *plan, time.Now())
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(t)
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	t, err := demoToken("alice", "", time.Now())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("upstream on %s. With the gateway running, try:\n\n", ln.Addr())
	fmt.Printf("  curl -i localhost:8088/api/hello\n")
	fmt.Printf("  curl -i -H 'Authorization: Bearer %s' localhost:8088/api/hello\n", t)
	fmt.Printf("  curl -i -H 'X-API-Key: demo-partner-key' localhost:8088/partners/hello\n\n")
	srv := &http.Server{Handler: upstream(), ReadHeaderTimeout: 5 * time.Second}
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

// upstream answers every path with who the gateway says is calling.
func upstream() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		who := r.Header.Get("X-Bouncer-Subject")
		if who == "" {
			who = "anonymous"
		}
		fmt.Fprintf(w, "hello %s (plan %q, by %q) at %s\n", who, r.Header.Get("X-Bouncer-Plan"), r.Header.Get("X-Bouncer-Auth-Method"), r.URL.Path)
	})
	return mux
}

// demoToken signs a token for user, valid for a day, with the example's
// demo key.
func demoToken(user, plan string, now time.Time) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	key, err := os.ReadFile(filepath.Join(filepath.Dir(file), "demo-hs256.key"))
	if err != nil {
		return "", err
	}
	claims := jwt.MapClaims{"iss": "https://example.test", "aud": "example-api", "sub": user,
		"iat": now.Unix(), "exp": now.Add(24 * time.Hour).Unix()}
	if plan != "" {
		claims["plan"] = plan
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
}
