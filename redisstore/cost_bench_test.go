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
	"github.com/bouncerhq/bouncer/calendar"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/store"
)

// BenchmarkRedisCost measures what checks cost Redis itself, on the
// standalone server of BOUNCER_REDIS_ADDR, from 64 goroutines at once
// through a store at its defaults:
//
//   - keys=10000: every algorithm, checks spread over 10 000 keys that
//     stay below their limit (state alive between checks), and a fixed
//     window of calendar months in New York's zone;
//   - keys=1: one busy key, rate 300 per second or per minute, checked far
//     more often than that (most checks denied), for the sliding window
//     log, whose state holds one entry per admitted check, beside the
//     fixed window;
//   - charge: the keys=10000 workload charged (Store.Charge, a settle's
//     second step) instead of checked, from 64 callers and from one,
//     beside the same checks from one caller.
//
// Besides ns/op it reports, from INFO before and after the run:
// "redis-cpu-µs/check" (the server process's user and system CPU, parsing
// and networking included), "fcall-µs/check" (the usec of FCALL in INFO
// commandstats, the library's own time with the commands it calls),
// "checks/call", "denied-%" and "degraded" (checks decided without Redis:
// 0, or the figures do not measure Redis). Whatever else the server runs
// meanwhile counts too.
func BenchmarkRedisCost(b *testing.B) {
	as := addrs(b, "BOUNCER_REDIS_ADDR")
	type bench struct {
		name    string
		keys    int
		limit   bouncer.Limit
		charge  bool
		callers int
	}
	var cases []bench
	for _, a := range bouncer.Algorithms() {
		l := bouncer.Limit{Name: "cost", Algorithm: a, Rate: 1 << 30, Period: time.Hour}
		if a == bouncer.TokenBucket || a == bouncer.GCRA || a == bouncer.LeakyBucket {
			l.Burst = 1 << 30
		}
		if a == bouncer.Concurrency {
			l.Rate = 1 << 20 // leases of an hour: a log of one per check
		}
		cases = append(cases, bench{"keys=10000/" + a.String(), 10000, l, false, 64})
		if store.Chargeable(l) {
			cases = append(cases, bench{"keys=10000/" + a.String() + "/charge", 10000, l, true, 64},
				bench{"keys=10000/" + a.String(), 10000, l, false, 1},
				bench{"keys=10000/" + a.String() + "/charge", 10000, l, true, 1})
		}
	}
	month := calendar.Period{Unit: calendar.Month, Zone: "America/New_York"}
	cal := bouncer.Limit{Name: "cost", Algorithm: bouncer.FixedWindow, Rate: 1 << 30, Period: month.Longest(), Calendar: month}
	cases = append(cases, bench{"keys=10000/fixed_window_calendar_month", 10000, cal, false, 64},
		bench{"keys=10000/fixed_window_calendar_month", 10000, cal, false, 1})
	for _, a := range []bouncer.Algorithm{bouncer.SlidingWindowLog, bouncer.FixedWindow} {
		for _, p := range []time.Duration{time.Second, time.Minute} {
			cases = append(cases, bench{fmt.Sprintf("keys=1/%s/rate=300/period=%v", a, p), 1, bouncer.Limit{Name: "busy", Algorithm: a, Rate: 300, Period: p}, false, 64})
		}
	}
	for _, bc := range cases {
		b.Run(fmt.Sprintf("%s/parallel=%d", bc.name, bc.callers), func(b *testing.B) {
			c, err := rueidis.NewClient(redisstore.ClientOption(as))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Close)
			s := newStore(b, c, redisstore.Options{Prefix: freshPrefix(), Timeout: redisstore.DefaultTimeout})
			reqs := make([]bouncer.Request, bc.keys)
			for i := range reqs {
				reqs[i] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "cost-" + strconv.Itoa(i), Limits: []bouncer.Limit{bc.limit}}}, Cost: 1}
			}
			var next, denied, degraded atomic.Int64
			before := redisUsage(b, c)
			// one makes one call, and reports false once the benchmark
			// failed.
			one := func(ctx context.Context) bool {
				req := reqs[int(next.Add(1))%len(reqs)]
				if bc.charge {
					if err := s.Charge(ctx, req); err != nil {
						b.Errorf("charge: %v", err)
						return false
					}
					return true
				}
				d, err := s.Check(ctx, req)
				if err != nil {
					b.Errorf("check: %v", err)
					return false
				}
				if d.Degraded {
					degraded.Add(1)
				}
				if !d.Allowed {
					denied.Add(1)
				}
				return true
			}
			b.ReportAllocs()
			b.ResetTimer()
			if bc.callers == 1 {
				for i := 0; i < b.N && one(context.Background()); i++ {
				}
			} else {
				b.SetParallelism(max(1, bc.callers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() && one(context.Background()) {
					}
				})
			}
			b.StopTimer()
			after := redisUsage(b, c)
			n := float64(b.N)
			b.ReportMetric((after.cpu-before.cpu)*1e6/n, "redis-cpu-µs/check")
			b.ReportMetric(float64(after.fcallUsec-before.fcallUsec)/n, "fcall-µs/check")
			b.ReportMetric(n/float64(max(after.fcalls-before.fcalls, 1)), "checks/call")
			b.ReportMetric(100*float64(denied.Load())/n, "denied-%")
			b.ReportMetric(float64(degraded.Load()), "degraded")
		})
	}
}

// usage is what a server has spent so far.
type usage struct {
	fcalls    int64   // calls of FCALL
	fcallUsec int64   // their time, in microseconds
	cpu       float64 // the process's user and system CPU, in seconds
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
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "cmdstat_fcall":
			for f := range strings.SplitSeq(v, ",") {
				if us, ok := strings.CutPrefix(f, "usec="); ok {
					u.fcallUsec, _ = strconv.ParseInt(us, 10, 64)
				} else if calls, ok := strings.CutPrefix(f, "calls="); ok {
					u.fcalls, _ = strconv.ParseInt(calls, 10, 64)
				}
			}
		case "used_cpu_user", "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			u.cpu += f
		}
	}
	return u
}
