package rlqs_test

import (
	"fmt"
	"log/slog"
	"net"
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
	f := newFleet(t, clock, cs, skewedOffered)
	f.run(3*time.Minute, func(elapsed time.Duration) {
		if elapsed >= 2*f.interval {
			f.checkAssigned(elapsed, skewedFair)
		}
	})
	checkWindows(t, f.perWin, 1000)
}

// A Redis that cannot be reached does not hold up the answers: the
// usage is counted by the store's policy, and the limit is divided among
// this server's own clients meanwhile.
func TestRedisDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	st, err := redisstore.New(redisstore.Options{ClientOption: redisstore.ClientOption([]string{addr}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := storetest.NewClock(start)
	cfg, err := rules.Parse("rlqs.yaml", []byte(perMinute))
	if err != nil {
		t.Fatal(err)
	}
	srv := &rlqs.Server{Engine: newEngine(cfg, st, clock), Demands: st, Now: clock.Now, Log: slog.New(slog.DiscardHandler)}
	cc := serve(t, srv)
	c := client(t, cc, rlqs.ClientOptions{Domain: "fleet", Now: clock.Now})
	for range 3 {
		c.Allow(apiBucket)
	}
	syncAll(t, c)
	if r := rlqs.Rate(c.Assignment(apiBucket)); !within(r, 1000.0/60, 0.01) {
		t.Errorf("with Redis down: assigned %.2f/s, want the whole limit %.2f/s for the one client", r, 1000.0/60)
	}
}
