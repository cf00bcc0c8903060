package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
)

func Example() {
	// A frozen clock keeps the example's output exact; leave Now nil to
	// use the process's clock.
	noon := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return noon }})
	// 10 per second with bursts of 3, and 1000 per day, checked together.
	limits := []bouncer.Limit{
		{Name: "second", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 3},
		{Name: "day", Algorithm: bouncer.FixedWindow, Rate: 1000, Period: 24 * time.Hour},
	}
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "user:42", Limits: limits}}, Cost: 1}
	for range 4 {
		d, err := store.Check(context.Background(), req)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.LimitName, d.Remaining)
	}
	// Output:
	// true second 2
	// true second 1
	// true second 0
	// false second 0
}
