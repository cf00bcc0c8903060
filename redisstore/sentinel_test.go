package redisstore_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/storetest"
)

// sentinelOption is how a store reaches the master of the Sentinel set
// s: the sentinels in InitAddress with their own user, the master's user
// for the master.
func sentinelOption(s redistest.Sentinel) rueidis.ClientOption {
	co := redisstore.ClientOption(s.Addrs)
	co.Sentinel = rueidis.SentinelOption{MasterSet: s.MasterSet, Username: s.User, Password: s.Password}
	co.Username, co.Password = s.MasterUser, s.MasterPassword
	return co
}

// The whole conformance suite through Sentinel (the shared set of
// scripts/redis-sentinel.sh, with ACL users on the sentinels and on the
// master), with the scripts' time pinned to the suite's fake clock.
func TestConformanceSentinel(t *testing.T) {
	co := sentinelOption(redistest.SentinelSet(t))
	c, err := rueidis.NewClient(co)
	if err != nil {
		t.Fatalf("connecting through Sentinel %v: %v", co.InitAddress, err)
	}
	t.Cleanup(c.Close)
	if c.Mode() != rueidis.ClientModeSentinel {
		t.Fatalf("client mode %v, want Sentinel", c.Mode())
	}
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
		var o redisstore.Options
		redisstore.PinClock(&o, clock.Now)
		return newStore(t, c, o)
	})
}

// TestSentinelACL makes stores through the Sentinel set with the right
// users and with wrong ones: with both right, Redis decides; the
// sentinels' password is not the master's, so a store that gives either
// one for both, or none to the sentinels, never connects, decides by
// policy, and says why in its Health.
func TestSentinelACL(t *testing.T) {
	set := redistest.SentinelSet(t)
	for _, tc := range []struct {
		name    string
		edit    func(co *rueidis.ClientOption)
		connect bool
		why     string // in Health().ConnectError when it does not connect
	}{
		{"both users", func(*rueidis.ClientOption) {}, true, ""},
		{"no sentinel user", func(co *rueidis.ClientOption) { co.Sentinel.Username, co.Sentinel.Password = "", "" }, false, "NOAUTH"},
		{"master's password to the sentinels", func(co *rueidis.ClientOption) {
			co.Sentinel.Username, co.Sentinel.Password = set.MasterUser, set.MasterPassword
		}, false, "WRONGPASS"},
		{"sentinels' password to the master", func(co *rueidis.ClientOption) {
			co.Username, co.Password = set.User, set.Password
		}, false, "WRONGPASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			co := sentinelOption(set)
			tc.edit(&co)
			s, err := redisstore.New(redisstore.Options{Client: co, Prefix: freshPrefix()})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer s.Close()
			wait := 10 * time.Second
			if !tc.connect {
				wait = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			err = s.WaitConnected(ctx)
			l := bouncer.Limit{Name: "acl", Algorithm: bouncer.FixedWindow, Rate: 1, Period: time.Hour, OnStoreError: bouncer.StoreErrorDeny}
			r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{l}}}, Cost: 1}
			d, cerr := s.Check(context.Background(), r)
			if cerr != nil {
				t.Fatalf("Check: %v", cerr)
			}
			if tc.connect {
				if err != nil || d.Degraded || !d.Allowed {
					t.Fatalf("with both users: WaitConnected %v, check %+v; want connected and allowed by Redis", err, d)
				}
				if d, _ := s.Check(context.Background(), r); d.Degraded || d.Allowed {
					t.Fatalf("second check of a limit of 1: %+v; want denied by Redis", d)
				}
				return
			}
			h := s.Health()
			if err == nil || h.Connected || !d.Degraded || d.Allowed {
				t.Fatalf("WaitConnected %v, health %+v, check %+v; want not connected, and the check denied by policy", err, h, d)
			}
			if h.ConnectError == nil || !strings.Contains(h.ConnectError.Error(), tc.why) {
				t.Errorf("Health().ConnectError = %v; want it to say %s", h.ConnectError, tc.why)
			}
		})
	}
}

// BenchmarkReplicaWait measures what WAIT-style durability would cost a
// check: a write alone, and a write followed on its connection by WAIT 1
// (returning once the replica acknowledged it, or after the store's
// deadline: unacked/op counts those), from 64 callers, on the
// shared Sentinel set's master. docs/redis.md ("A failover's losses")
// says why the store does not wait.
func BenchmarkReplicaWait(b *testing.B) {
	co := sentinelOption(redistest.SentinelSet(b))
	c, err := rueidis.NewClient(co)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	key := freshPrefix() + ":wait"
	defer c.Do(context.Background(), c.B().Del().Key(key).Build())
	for _, wait := range []bool{false, true} {
		name := "write"
		if wait {
			name = "write+wait"
		}
		b.Run(name+"/callers=64", func(b *testing.B) {
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			var unacked atomic.Int64 // WAITs that ran out of the store's deadline
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					cmds := rueidis.Commands{c.B().Incr().Key(key).Build()}
					if wait {
						cmds = append(cmds, c.B().Wait().Numreplicas(1).Timeout(redisstore.DefaultTimeout.Milliseconds()).Build())
					}
					rs := c.DoMulti(ctx, cmds...)
					for _, r := range rs {
						if err := r.Error(); err != nil {
							b.Error(err)
							return
						}
					}
					if n, _ := rs[len(rs)-1].AsInt64(); wait && n != 1 {
						unacked.Add(1)
					}
				}
			})
			b.ReportMetric(float64(unacked.Load())/float64(b.N), "unacked/op")
		})
	}
}
