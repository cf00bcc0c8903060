package rlsload_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/bouncerhq/bouncer/bench/rlsload"
)

// Ten seconds of calls from 64 streams, each checking three user_id
// values, against an Envoy RLS server configured with a limit of a
// million a second per value.
func Example() {
	l, err := rlsload.New(rlsload.Config{Addr: "127.0.0.1:8081", Descriptors: 3, Limit: 1_000_000})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	r, err := l.Run(context.Background(), rlsload.Spec{Streams: 64, Duration: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.0f calls/s, p99 %v, %d failed\n", r.PerSecond(), r.P99, r.Failed)
}
