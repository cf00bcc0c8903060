// Sharedlimit shows two Bouncer instances sharing one limit through Redis:
// two stores, each with its own connection, as two servers would have,
// charge one user's limit of 5 per minute in turn. Together they admit 5,
// not 5 each. Then the instances lose Redis (a store whose deadline
// cannot be met stands in for a failed server), and each falls back to its
// own in-memory copy of the limit, as the limit's OnStoreError says.
//
//	bash scripts/redis-up.sh --standalone   # one Redis, on 127.0.0.1:16379
//	go run ./examples/sharedlimit 127.0.0.1:16379
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

func main() {
	addr := "127.0.0.1:16379"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	if err := run(os.Stdout, addr, fmt.Sprintf("example-%d", time.Now().UnixNano())); err != nil {
		fmt.Fprintln(os.Stderr, "sharedlimit:", err)
		os.Exit(1)
	}
}

// run writes the decisions to w; prefix keeps this run's keys apart.
func run(w io.Writer, addr, prefix string) error {
	perMinute := bouncer.Limit{
		Name: "per-minute", Algorithm: bouncer.GCRA, Rate: 5, Period: time.Minute, Burst: 5,
		OnStoreError: bouncer.StoreErrorLocal,
	}
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "user:alice", Limits: []bouncer.Limit{perMinute}}}, Cost: 1}
	ctx := context.Background()

	var instances [2]*redisstore.Store
	for i := range instances {
		// A generous deadline: this example's output must not depend on
		// how busy the machine is (the default is 50ms).
		s, err := redisstore.New(redisstore.Options{URL: "redis://" + addr, Prefix: prefix, Timeout: 250 * time.Millisecond})
		if err != nil {
			return err
		}
		defer s.Close()
		instances[i] = s
	}
	for i := range 7 {
		n := i % 2
		d, err := instances[n].Check(ctx, req)
		if err != nil {
			return err
		}
		report(w, fmt.Sprintf("instance %d", n+1), d)
	}

	// Redis out of reach: a deadline no call can meet.
	down, err := redisstore.New(redisstore.Options{URL: "redis://" + addr, Prefix: prefix, Timeout: time.Nanosecond})
	if err != nil {
		return err
	}
	defer down.Close()
	for range 6 {
		d, err := down.Check(ctx, req)
		if err != nil {
			return err
		}
		report(w, "no redis  ", d)
	}
	return nil
}

func report(w io.Writer, who string, d bouncer.Decision) {
	how := "redis"
	if d.Degraded {
		how = "local"
	}
	if d.Allowed {
		fmt.Fprintf(w, "%s: allowed (%s), %d left\n", who, how, d.Remaining)
		return
	}
	fmt.Fprintf(w, "%s: denied (%s), retry in %v\n", who, how, d.RetryAfter.Round(time.Second))
}
