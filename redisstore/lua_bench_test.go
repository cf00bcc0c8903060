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
// sets), each under a limit of 2^30 an hour that they never reach. With
// state=live a bucket's keys are charged half their burst first, so that
// every check finds its state ahead of now; with state=refilled they are
// not, and a key's next check finds its state back to fresh (a unit comes
// back every 3.4 µs, and the loop comes back to a key after 32 checks),
// as a client below its limit does. Nothing of a call around it — reading the
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
	type bench struct {
		a     bouncer.Algorithm
		state string
	}
	var cases []bench
	for _, a := range bouncer.Algorithms() {
		cases = append(cases, bench{a, "live"})
		if a == bouncer.TokenBucket || a == bouncer.GCRA || a == bouncer.LeakyBucket {
			cases = append(cases, bench{a, "refilled"})
		}
	}
	for _, bc := range cases {
		b.Run("algorithm="+bc.a.String()+"/state="+bc.state, func(b *testing.B) {
			l := bouncer.Limit{Name: "loop", Algorithm: bc.a, Rate: 1 << 30, Period: time.Hour}
			warm := int64(1)
			if bc.a == bouncer.TokenBucket || bc.a == bouncer.GCRA || bc.a == bouncer.LeakyBucket {
				l.Burst = 1 << 30
				if bc.state == "live" {
					warm = 1 << 29
				}
			}
			s := newStore(b, c, redisstore.Options{Prefix: freshPrefix(), Buckets: 1})
			rs := make([]bouncer.Request, batch)
			for i := range rs {
				rs[i] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "loop-" + strconv.Itoa(i), Limits: []bouncer.Limit{l}}}, Cost: warm}
				if d, err := s.Check(context.Background(), rs[i]); err != nil || !d.Allowed {
					b.Fatalf("warming: %+v, %v", d, err)
				}
				rs[i].Cost = 1
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
