package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// BenchmarkScriptBatch measures what a batched script call of ten
// one-limit checks costs Redis, with the checks' arguments packed (what
// the store sends) or in the general batch format: the same checks, the
// same decisions. Calls go out from 4 goroutines per vCPU, so rueidis
// pipelines them, over 100 000 keys; each reports the server's CPU per
// check ("redis-cpu-µs/check", INFO cpu, parsing and networking included)
// and the script's time per check ("redis-script-µs/check"), as
// BenchmarkFixedWindowChargeDenied does. The limit is a GCRA, or a fixed
// window with ChargeDenied (bouncer serve's check), of an hour, so that
// every check finds its key's state alive and its hash's TTL long enough:
// what is measured is the check itself, not the expiry bookkeeping of keys
// that come and go (which BenchmarkFixedWindowChargeDenied includes).
func BenchmarkScriptBatch(b *testing.B) {
	as := addrs(b, "BOUNCER_REDIS_ADDR")
	limits := []bouncer.Limit{
		{Name: "gcra", Algorithm: bouncer.GCRA, Rate: 1000, Period: time.Hour, Burst: 1_000_000},
		{Name: "fixed_window", Algorithm: bouncer.FixedWindow, Rate: 1_000_000, Period: time.Hour, ChargeDenied: true},
	}
	const perCall, keys = 10, 100_000
	for _, l := range limits {
		for _, packed := range []bool{true, false} {
			format := "args"
			if packed {
				format = "packed"
			}
			b.Run(fmt.Sprintf("algorithm=%s/format=%s", l.Name, format), func(b *testing.B) {
				c, err := rueidis.NewClient(redisstore.ClientOption(as))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(c.Close)
				s := newStore(b, c, redisstore.Options{})
				// The calls are made before the clock starts, ten keys
				// each.
				calls := make([][2][]string, keys/perCall)
				for i := range calls {
					reqs := make([]bouncer.Request, perCall)
					for j := range reqs {
						reqs[j] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k" + strconv.Itoa(i*perCall+j), Limits: []bouncer.Limit{l}}}, Cost: 1}
					}
					ks, args, err := redisstore.BatchCall(s, reqs, packed)
					if err != nil {
						b.Fatal(err)
					}
					calls[i] = [2][]string{ks, args}
				}
				// Every key gets its state first: what is measured is a
				// check of a key the store knows, as in the benchmark
				// module.
				for _, call := range calls {
					if err := redisstore.ExecScript(context.Background(), c, call[0], call[1]).Error(); err != nil {
						b.Fatal(err)
					}
				}
				var next, failed atomic.Int64
				before := redisUsage(b, c)
				b.SetParallelism(4)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						call := calls[int(next.Add(1))%len(calls)]
						resp := redisstore.ExecScript(ctx, c, call[0], call[1])
						if packed {
							b, err := resp.ToString()
							if err != nil || len(b) != perCall*redisstore.PackedReplyLen || b[0] != 1 {
								failed.Add(1)
							}
							continue
						}
						vals, err := resp.AsIntSlice()
						if err != nil || len(vals) != perCall*6 || vals[0] != 1 {
							failed.Add(1)
						}
					}
				})
				b.StopTimer()
				after := redisUsage(b, c)
				if n := failed.Load(); n > 0 {
					b.Fatalf("%d calls failed or denied a check", n)
				}
				n := float64(b.N * perCall)
				b.ReportMetric((after.cpu-before.cpu)*1e6/n, "redis-cpu-µs/check")
				b.ReportMetric(float64(after.scriptUsec-before.scriptUsec)/n, "redis-script-µs/check")
			})
		}
	}
}
