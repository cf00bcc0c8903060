package rlqs_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// Two servers on one Redis, each serving some of the proxies, divide the
// limit as one: by every proxy's demand, shared through Redis, and
// within the limit in total.
func TestTwoServersKeepOneAllocation(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := fmt.Sprintf("rlqs%d", time.Now().UnixNano())
	clock := storetest.NewClock(start)
	cfg, err := rules.Parse("rlqs.yaml", []byte(perMinute))
	if err != nil {
		t.Fatal(err)
	}
	var ccs []*grpc.ClientConn
	for range 2 {
		st, err := redisstore.New(redisstore.Options{ClientOption: redisstore.ClientOption([]string{addr}), Prefix: prefix, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		srv := &rlqs.Server{Engine: newEngine(cfg, st, clock), Demands: st, Now: clock.Now}
		ccs = append(ccs, serve(t, srv))
	}
	cs := []*rlqs.Client{
		client(t, ccs[0], rlqs.ClientOptions{Domain: "fleet", Now: clock.Now}),
		client(t, ccs[1], rlqs.ClientOptions{Domain: "fleet", Now: clock.Now}),
		client(t, ccs[1], rlqs.ClientOptions{Domain: "fleet", Now: clock.Now}),
	}
	fair := []float64{400.0 / 60, 400.0 / 60, 200.0 / 60}
	f := newFleet(t, clock, cs, []float64{2000 * .7 / 60, 2000 * .2 / 60, 2000 * .1 / 60})
	f.run(3*time.Minute, func(elapsed time.Duration) {
		if elapsed < 2*f.interval {
			return
		}
		for i, p := range f.proxies {
			if r := rlqs.Rate(p.c.Assignment(apiBucket)); !within(r, fair[i], 0.10) {
				t.Errorf("%v: proxy %d assigned %.2f/s, want %.2f/s ± 10%%", elapsed, i, r, fair[i])
			}
		}
	})
	checkWindows(t, f.perWin, 1000)
}
