package refsvc_test

import (
	"context"
	"fmt"
	"log"

	"github.com/bouncerhq/bouncer/bench/refsvc"
)

// envoyproxy/ratelimit on a standalone Redis, holding every user_id to
// 100 a second.
func ExampleEnvoyRatelimit() {
	s, err := refsvc.EnvoyRatelimit{
		RedisAddrs: []string{"127.0.0.1:16379"},
		Config:     refsvc.LimitConfig("bench", "user_id", 100, "second"),
	}.Start(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Stop()
	fmt.Println("Envoy RLS v3 on", s.Addr)
}
