// Command rlqsfleet shows how Bouncer's rate limit quota service (RLQS)
// divides one limit among a fleet of proxies by their demand. It serves
// RLQS on a loopback port, and three simulated proxies (rlqs.Client, which
// behaves as Envoy's filter does) offer 70, 20 and 10 % of twice a limit
// of 600 requests a minute. Every 5 s of simulated time each reports its
// usage and gets a token bucket back; the example prints what each was
// assigned and admitted. A minute runs at once, on a simulated clock.
//
//	go run ./examples/rlqsfleet
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

const config = `domain: fleet
descriptors:
  - key: api
    rate_limit: {unit: minute, requests_per_unit: 600}
`

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	clk := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // the simulated time every part reads
	cfg, err := rules.Parse("fleet.yaml", []byte(config))
	if err != nil {
		return err
	}
	store := memstore.New(memstore.Options{Now: clk.Now})
	defer store.Close()
	engine := rules.NewEngine(cfg, store)
	engine.Now = clk.Now

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	(&rlqs.Server{Engine: engine, Now: clk.Now}).Register(g)
	go g.Serve(l)
	defer g.Stop()
	ctx := context.Background()
	bucket := map[string]string{"api": "orders"}
	names := []string{"A", "B", "C"}
	offered := []float64{14, 4, 2} // a second: 70, 20 and 10 % of twice 10 a second
	proxies := make([]*rlqs.Client, len(names))
	for i := range proxies {
		// A proxy is a connection: the streams of one divide one share.
		conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		if proxies[i], err = rlqs.NewClient(ctx, conn, rlqs.ClientOptions{Domain: "fleet", Now: clk.Now}); err != nil {
			return err
		}
		defer proxies[i].Close()
		proxies[i].Allow(bucket) // its first request: reported at once
		if err := proxies[i].Sync(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "limit 600 a minute (10/s); offered A %v/s, B %v/s, C %v/s\n", offered[0], offered[1], offered[2])
	fmt.Fprintln(out, "   t   assigned A/s   B/s    C/s   admitted A  B  C")
	due := make([]float64, len(proxies))
	admitted := make([]int, len(proxies))
	const step = 10 * time.Millisecond
	for tick := 1; tick <= 12; tick++ {
		for range rlqs.DefaultInterval / step {
			clk.Advance(step)
			for i, p := range proxies {
				due[i] += offered[i] * step.Seconds()
				for ; due[i] >= 1; due[i]-- {
					if p.Allow(bucket) {
						admitted[i]++
					}
				}
			}
		}
		for _, p := range proxies {
			if err := p.Sync(ctx); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "%3ds      %5.2f %5.2f  %5.2f        %3d %2d %2d\n", tick*5,
			rlqs.Rate(proxies[0].Assignment(bucket)), rlqs.Rate(proxies[1].Assignment(bucket)), rlqs.Rate(proxies[2].Assignment(bucket)),
			admitted[0], admitted[1], admitted[2])
		clear(admitted)
	}
	return nil
}
