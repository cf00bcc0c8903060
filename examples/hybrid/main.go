// Hybrid shows three Bouncer instances sharing one limit through Redis in
// lease mode: each takes quota from Redis in leases and spends it
// locally, so most checks make no round trip, and together they still
// admit no more than the limit.
//
//	bash scripts/redis-up.sh --standalone   # one Redis, on 127.0.0.1:16379
//	go run ./examples/hybrid 127.0.0.1:16379
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/redisstore"
)

func main() {
	addr := "127.0.0.1:16379"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	if err := run(os.Stdout, addr, fmt.Sprintf("example-%d", time.Now().UnixNano())); err != nil {
		fmt.Fprintln(os.Stderr, "hybrid:", err)
		os.Exit(1)
	}
}

// run writes what the instances admitted to w; prefix keeps this run's
// keys apart.
func run(w io.Writer, addr, prefix string) error {
	// 100 an hour: the window does not turn while the example runs (unless
	// an hour begins meanwhile, which the example then says).
	hourly := bouncer.Limit{Name: "hourly", Algorithm: bouncer.FixedWindow, Rate: 100, Period: time.Hour, Mode: bouncer.Lease}
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "user:alice", Limits: []bouncer.Limit{hourly}}}, Cost: 1}
	ctx := context.Background()

	var instances [3]*hybrid.Limiter
	for i := range instances {
		// Each instance has its own connection, as three servers would.
		s, err := redisstore.New(redisstore.Options{URL: "redis://" + addr, Prefix: prefix, Timeout: 250 * time.Millisecond})
		if err != nil {
			return err
		}
		defer s.Close()
		instances[i] = hybrid.New(s, nil, hybrid.Options{})
		defer instances[i].Close()
	}
	hour := time.Now().Truncate(time.Hour)
	var admitted [3]int
	const checks = 600
	for i := range checks {
		d, err := instances[i%3].Check(ctx, req)
		if err != nil {
			return err
		}
		if d.Allowed {
			admitted[i%3]++
		}
	}
	if !time.Now().Truncate(time.Hour).Equal(hour) {
		fmt.Fprintln(w, "an hour began while the example ran: its window turned; run it again")
	}
	leases := uint64(0)
	for _, h := range instances {
		leases += h.Stats().LeasesTaken
	}
	total := admitted[0] + admitted[1] + admitted[2]
	fmt.Fprintf(w, "%d checks of a limit of %d an hour, on three instances\n", checks, hourly.Rate)
	fmt.Fprintf(w, "admitted: %d (never more than the limit: %v)\n", total, total <= int(hourly.Rate))
	fmt.Fprintf(w, "calls to Redis: %d leases taken for %d checks (fewer than one in ten: %v)\n", leases, checks, leases*10 < checks)
	return nil
}
