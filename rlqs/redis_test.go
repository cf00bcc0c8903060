package rlqs_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
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
	var (
		ccs  []*grpc.ClientConn
		srvs []*rlqs.Server
	)
	for range 2 {
		st, err := redisstore.New(redisstore.Options{URL: "redis://" + addr, Prefix: prefix, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		srv := &rlqs.Server{Engine: newEngine(cfg, st, clock), Demands: testEpochs{st, clock}, Now: clock.Now}
		srvs = append(srvs, srv)
		ccs = append(ccs, serve(t, srv))
	}
	cs := []*rlqs.Client{
		client(t, ccs[0], rlqs.ClientOptions{Domain: "fleet", Now: clock.Now}),
		client(t, ccs[1], rlqs.ClientOptions{Domain: "fleet", Now: clock.Now}),
		client(t, serve(t, srvs[1]), rlqs.ClientOptions{Domain: "fleet", Now: clock.Now}),
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
	st, err := redisstore.New(redisstore.Options{URL: "redis://" + addr, Logger: slog.New(slog.DiscardHandler)})
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

// testEpochs is a Demands on Redis for a server on a test's clock, which
// cannot move Redis's: the division's epochs are numbered by the test's
// clock, and the records are kept in epochs of a millisecond of Redis's,
// so that every division reads the latest ones.
type testEpochs struct {
	st    *redisstore.Store
	clock *storetest.Clock
}

func (e testEpochs) RecordDemand(ctx context.Context, bucket, client string, demand float64, interval, ttl time.Duration) (int64, error) {
	if _, err := e.st.RecordDemand(ctx, bucket, client, demand, time.Millisecond, ttl); err != nil {
		return 0, err
	}
	return e.clock.Now().UnixMilli() / interval.Milliseconds(), nil
}

func (e testEpochs) ForgetDemand(ctx context.Context, bucket, client string, _ time.Duration) error {
	return e.st.ForgetDemand(ctx, bucket, client, time.Millisecond)
}

func (e testEpochs) DemandsAt(ctx context.Context, bucket string, _ int64, _ time.Duration) (map[string]float64, error) {
	// The next millisecond's epoch: the latest records, on Redis's
	// clock (the test's machine's).
	return e.st.DemandsAt(ctx, bucket, time.Now().UnixMilli()+1, time.Millisecond)
}

func (e testEpochs) Claim(ctx context.Context, bucket string, epoch int64, free, amount float64) (float64, error) {
	return e.st.Claim(ctx, bucket, epoch, free, amount)
}

// LocalDemands and the Redis store, standalone and Cluster, keep demands
// alike: a division reads the demands as they stood when its epoch began
// (records of the epoch and after do not count), a forgotten client
// counts until its epoch ends, a record lives its TTL, and claims of an
// epoch never take more than it left free. Epochs are of 50 ms, on each
// one's clock: a new one is waited for by recording (another bucket's
// demand) until one begins, and a run whose records fall across an
// epoch's end unexpectedly is run again on a bucket of its own.
func TestDemandsConformance(t *testing.T) {
	stores := map[string]func(t *testing.T) rlqs.Demands{
		"local": func(*testing.T) rlqs.Demands { return rlqs.NewLocalDemands(nil) },
		"redis": func(t *testing.T) rlqs.Demands { return redisDemands(t, []string{redistest.Addr(t)}) },
		"cluster": func(t *testing.T) rlqs.Demands {
			return redisDemands(t, redistest.ClusterAddrs(t))
		},
	}
	for name, newDemands := range stores {
		t.Run(name, func(t *testing.T) {
			d := newDemands(t)
			for i := range 20 {
				if testDemands(t, d, fmt.Sprint("bucket", i)) {
					return
				}
			}
			t.Fatal("20 runs fell across epochs")
		})
	}
}

func redisDemands(t *testing.T, addrs []string) *redisstore.Store {
	st, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption(addrs), Prefix: fmt.Sprintf("rlqs%d", time.Now().UnixNano()), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// testDemands runs the scenario on bucket, and reports whether its
// records fell in the epochs it meant.
func testDemands(t *testing.T, d rlqs.Demands, bucket string) bool {
	ctx, interval := context.Background(), 50*time.Millisecond
	record := func(bucket, client string, demand float64, ttl time.Duration) int64 {
		t.Helper()
		e, err := d.RecordDemand(ctx, bucket, client, demand, interval, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	forget := func(client string) {
		t.Helper()
		if err := d.ForgetDemand(ctx, bucket, client, interval); err != nil {
			t.Fatal(err)
		}
	}
	at := func(e int64) map[string]float64 {
		t.Helper()
		got, err := d.DemandsAt(ctx, bucket, e, interval)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// next waits for an epoch after since.
	next := func(since int64) int64 {
		for {
			if e := record("tick", "tick", 1, time.Minute); e > since {
				return e
			}
		}
	}
	// A check's failure counts only if its epoch had not ended by the
	// time it was read (still): a forget or a read that fell in the
	// next epoch is another scenario, run again on a bucket of its own.
	var failed []string
	check := func(what string, got, want map[string]float64) {
		if !maps.Equal(got, want) {
			failed = append(failed, fmt.Sprintf("%s: %v, want %v", what, got, want))
		}
	}
	still := func(e int64) bool { return record("tick", "tick", 1, time.Minute) == e }
	// Each division is read after the records that must not change it.
	e1 := next(0)
	if record(bucket, "a", 1, time.Minute) != e1 || record("other", "a", 9, time.Minute) != e1 {
		return false
	}
	check("in the epoch of the first record", at(e1), map[string]float64{})
	if !still(e1) {
		return false
	}
	e2 := next(e1)
	if record(bucket, "a", 2, time.Minute) != e2 || record(bucket, "a", 3, time.Minute) != e2 || record(bucket, "b", math.Inf(1), time.Minute) != e2 {
		return false
	}
	forget("b")
	check("at the start of the epoch after it", at(e2), map[string]float64{"a": 1})
	if !still(e2) {
		return false
	}
	e3 := next(e2)
	check("with b forgotten in the epoch it was recorded in", at(e3), map[string]float64{"a": 3})
	if record(bucket, "a", 4, time.Minute) != e3 {
		return false
	}
	forget("a")
	check("with a recorded and forgotten in the epoch", at(e3), map[string]float64{"a": 3})
	if !still(e3) {
		return false
	}
	e4 := next(e3)
	if record(bucket, "short", 1, time.Millisecond) != e4 || record(bucket, "c", 5, time.Minute) != e4 {
		return false
	}
	check("with a forgotten in the epoch before", at(e4), map[string]float64{})
	if !still(e4) {
		return false
	}
	e5 := next(e4)
	check("after a record's TTL", at(e5), map[string]float64{"c": 5})
	if !still(e5) {
		return false
	}
	for _, f := range failed {
		t.Error(f)
	}

	claims := []struct {
		epoch        int64
		free, amount float64
		want         float64
	}{
		{e5, 10, 4, 4},
		{e5, 10, 8, 6},   // what is left
		{e5, 10, 1, 0},   // nothing
		{e5, 10, -3, -3}, // given back
		{e5, 10, 5, 3},
		{e5 - 1, 10, 5, 0}, // an epoch over
		{e5 + 1, 7, 5, 5},  // a new epoch
	}
	for _, c := range claims {
		got, err := d.Claim(ctx, bucket, c.epoch, c.free, c.amount)
		if err != nil || got != c.want {
			t.Errorf("Claim(epoch %+d, free %v, %v) = %v, %v; want %v", c.epoch-e5, c.free, c.amount, got, err, c.want)
		}
	}
	return true
}
