package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// BenchmarkLuaLoop measures the library's Lua alone: one EVAL, on the
// standalone server of BOUNCER_REDIS_ADDR, runs the check function again
// and again on a batch of 32 checks of 32 keys of one hash (or 32 sorted
// sets), each under a limit of 2^30 an hour that they never reach, so
// that state stays live. Nothing of a call around it — reading the
// command, the reply, a round trip, the VM's scheduling between calls —
// is counted: "lua-ns/check" is the time the loop took by Redis's clock
// over the checks it decided. ns/op counts the EVAL's round trip too.
func BenchmarkLuaLoop(b *testing.B) {
	as := addrs(b, "BOUNCER_REDIS_ADDR")
	c, err := rueidis.NewClient(redisstore.ClientOption(as))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	script := redisstore.CheckLoopScript()
	const batch = 32
	for _, a := range bouncer.Algorithms() {
		b.Run("algorithm="+a.String(), func(b *testing.B) {
			l := bouncer.Limit{Name: "loop", Algorithm: a, Rate: 1 << 30, Period: time.Hour}
			if a == bouncer.TokenBucket || a == bouncer.GCRA || a == bouncer.LeakyBucket {
				l.Burst = 1 << 30
			}
			s := newStore(b, c, redisstore.Options{Client: c, Prefix: freshPrefix(), Buckets: 1})
			rs := make([]bouncer.Request, batch)
			for i := range rs {
				rs[i] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "loop-" + strconv.Itoa(i), Limits: []bouncer.Limit{l}}}, Cost: 1}
				if _, err := s.Check(context.Background(), rs[i]); err != nil {
					b.Fatal(err)
				}
			}
			keys, args, err := redisstore.CheckCall(s, rs)
			if err != nil {
				b.Fatal(err)
			}
			loops := (b.N + batch - 1) / batch
			b.ResetTimer()
			us, err := c.Do(context.Background(), c.B().Eval().Script(script).Numkeys(int64(len(keys))).Key(keys...).Arg(append(args, strconv.Itoa(loops))...).Build()).AsInt64()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(us)*1000/float64(loops*batch), "lua-ns/check")
		})
	}
}
