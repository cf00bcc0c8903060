// Quickstart checks a burst of requests from two users against two limits
// at once — 5 per second with bursts of 3, and 20 per minute — on the
// in-memory store, and prints each decision.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
)

func main() {
	if err := run(os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run writes the decisions to w. now is the store's clock; nil means the
// real one.
func run(w io.Writer, now func() time.Time) error {
	store := memstore.New(memstore.Options{Now: now})
	defer store.Close()

	limits := []bouncer.Limit{
		{Name: "per-second", Algorithm: bouncer.TokenBucket, Rate: 5, Period: time.Second, Burst: 3},
		{Name: "per-minute", Algorithm: bouncer.SlidingWindowLog, Rate: 20, Period: time.Minute},
	}
	for _, l := range limits {
		if err := l.Validate(); err != nil {
			return err
		}
	}
	for _, user := range []string{"alice", "alice", "alice", "alice", "bob"} {
		d, err := store.Check(context.Background(), bouncer.Request{
			Keys: []bouncer.KeyLimits{{Key: "user:" + user, Limits: limits}},
			Cost: 1,
		})
		if err != nil {
			return err // the store failed; a denial is not an error
		}
		if d.Allowed {
			fmt.Fprintf(w, "%-5s allowed: %d left under %s\n", user, d.Remaining, d.LimitName)
		} else {
			fmt.Fprintf(w, "%-5s denied by %s: retry in %v\n", user, d.LimitName, d.RetryAfter)
		}
	}
	return nil
}
