package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// scriptLoopPoint is where BenchmarkScriptLoop loops: the statement of
// check.lua that decides a packed batch.
const scriptLoopPoint = "local r = F.packedStop(false)"

// BenchmarkScriptLoop measures the script's own work for a check of a
// bucket, without the call around it: one EVAL of check.lua in which the
// statement that decides a packed batch of 40 GCRA checks runs in a loop
// (b.N/40 times, each time deciding all 40 again), so that one op is one
// check, HGET, decision, HSET and reply included, and nothing else. Run
// in one script, it is free of what makes calls vary on a shared VM (round
// trips, scheduling, other processes between calls): its runs agree to a
// few percent where BenchmarkScriptBatch's vary by up to 40 %. The keys are
// warmed with an hour's worth of a 1/s limit, as BenchmarkRedisCheck's in
// the benchmark module, so that every check is allowed and finds its
// state and its hash's TTL in place.
func BenchmarkScriptLoop(b *testing.B) {
	as := addrs(b, "BOUNCER_REDIS_ADDR")
	if strings.Count(redisstore.CheckLua, scriptLoopPoint) != 1 {
		b.Fatalf("check.lua has no one %q to loop at", scriptLoopPoint)
	}
	c, err := rueidis.NewClient(redisstore.ClientOption(as))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	s := newStore(b, c, redisstore.Options{Buckets: 256})
	l := bouncer.Limit{Name: "gcra", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Second, Burst: 1_000_000}
	const perCall = 40
	call := func(cost int64, first int) (keys, args []string) {
		reqs := make([]bouncer.Request, perCall)
		for j := range reqs {
			reqs[j] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k" + strconv.Itoa(first+j), Limits: []bouncer.Limit{l}}}, Cost: cost}
		}
		keys, args, err := redisstore.BatchCall(s, reqs, true)
		if err != nil {
			b.Fatal(err)
		}
		return keys, args
	}
	keys, args := call(3600, 0)
	if err := redisstore.ExecScript(context.Background(), c, keys, args).Error(); err != nil {
		b.Fatal(err)
	}
	keys, args = call(1, 0)
	reps := (b.N + perCall - 1) / perCall
	loop := strings.Replace(redisstore.CheckLua, scriptLoopPoint, `for _ = 1, `+strconv.Itoa(reps)+` do
		F.out, F.k = {}, 0
		F.packedStop(false)
		if F.k ~= F.n then
			return 'undecided'
		end
	end
	do
		return F.packedReply()
	end
	`, 1)
	b.ResetTimer()
	reply, err := c.Do(context.Background(), c.B().Eval().Script(loop).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()).ToString()
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if len(reply) != perCall*redisstore.PackedReplyLen || reply[0] != 1 {
		b.Fatalf("reply of %d bytes (first %v), want %d, allowed", len(reply), reply[:min(len(reply), 1)], perCall*redisstore.PackedReplyLen)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reps*perCall), "ns/check")
}
