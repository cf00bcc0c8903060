package store_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/store"
)

// A store states the capabilities it offers with store's interfaces;
// bouncer.Settle then charges through Charge.
func Example() {
	m := memstore.New(memstore.Options{})
	defer m.Close()
	var s bouncer.Limiter = m
	_, ok := s.(store.Charger)
	fmt.Println("charger:", ok)

	l := bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 10}
	r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "user:1", Limits: []bouncer.Limit{l}}}, Cost: 2}
	d, _ := s.Check(context.Background(), r)
	err := bouncer.Settle(context.Background(), s, r, d, 5)
	after, _ := s.Check(context.Background(), bouncer.Request{Keys: r.Keys, Peek: true})
	fmt.Println(err, after.Remaining)
	// Output:
	// charger: true
	// <nil> 5
}
