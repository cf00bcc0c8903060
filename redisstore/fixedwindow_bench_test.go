package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// BenchmarkFixedWindowChargeDenied measures the check that bouncer serve
// makes for an envoyproxy/ratelimit config: one fixed window with
// ChargeDenied per check, spread over many distinct keys, from 64
// goroutines at once on the standalone server (so batched), with the
// client options the store connects with by default.
//
// Besides ns/op it reports what the checks cost Redis, from INFO on the
// server of BOUNCER_REDIS_ADDR before and after the run: the script's time
// per check ("redis-script-µs/check": the usec of EVALSHA and EVAL in INFO
// commandstats, which include the commands the script calls), the server
// process's CPU per check ("redis-cpu-µs/check": INFO cpu, user and
// system, parsing and networking included) and the checks per script call
// ("checks/call"). Whatever else the server runs meanwhile counts too: run
// it on a server of its own for exact figures. "denied-%" is the share of
// denied checks.
func BenchmarkFixedWindowChargeDenied(b *testing.B) {
	as := addrs(b, "BOUNCER_REDIS_ADDR")
	cases := []struct {
		keys   int
		period time.Duration
		rate   int64
	}{
		{10000, time.Second, 10},
		{10000, time.Minute, 100},
		{100, time.Second, 10},
	}
	for _, bc := range cases {
		b.Run(fmt.Sprintf("keys=%d/period=%v/parallel=64", bc.keys, bc.period), func(b *testing.B) {
			c, err := rueidis.NewClient(redisstore.ClientOption(as))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Close)
			// A generous deadline: a check that falls back by policy
			// would not measure Redis.
			s := newStore(b, c, redisstore.Options{Timeout: 100 * time.Millisecond})
			limit := bouncer.Limit{Name: "rls", Algorithm: bouncer.FixedWindow, Rate: bc.rate, Period: bc.period, ChargeDenied: true}
			reqs := make([]bouncer.Request, bc.keys)
			for i := range reqs {
				reqs[i] = bouncer.Request{
					Keys: []bouncer.KeyLimits{{Key: "fw-" + strconv.Itoa(i), Limits: []bouncer.Limit{limit}}},
					Cost: 1,
				}
			}
			var next, denied atomic.Int64
			before := redisUsage(b, c)
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					r := &reqs[int(next.Add(1))%len(reqs)]
					d, err := s.Check(ctx, *r)
					if err != nil || d.Degraded {
						b.Errorf("check: %+v, %v", d, err)
						return
					}
					if !d.Allowed {
						denied.Add(1)
					}
				}
			})
			b.StopTimer()
			after := redisUsage(b, c)
			n := float64(b.N)
			b.ReportMetric(float64(after.scriptUsec-before.scriptUsec)/n, "redis-script-µs/check")
			b.ReportMetric((after.cpu-before.cpu)*1e6/n, "redis-cpu-µs/check")
			b.ReportMetric(n/float64(max(after.scripts-before.scripts, 1)), "checks/call")
			b.ReportMetric(100*float64(denied.Load())/n, "denied-%")
		})
	}
}

// usage is what a server has spent so far.
type usage struct {
	scripts    int64   // calls of EVALSHA and EVAL
	scriptUsec int64   // their time, in microseconds
	cpu        float64 // the process's user and system CPU, in seconds
}

// redisUsage reads c's server's usage.
func redisUsage(t testing.TB, c rueidis.Client) usage {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats", "cpu").Build()).ToString()
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	var u usage
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch name {
		case "cmdstat_evalsha", "cmdstat_eval":
			for f := range strings.SplitSeq(v, ",") {
				if us, ok := strings.CutPrefix(f, "usec="); ok {
					n, _ := strconv.ParseInt(us, 10, 64)
					u.scriptUsec += n
				} else if calls, ok := strings.CutPrefix(f, "calls="); ok {
					n, _ := strconv.ParseInt(calls, 10, 64)
					u.scripts += n
				}
			}
		case "used_cpu_user", "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			u.cpu += f
		}
	}
	return u
}
