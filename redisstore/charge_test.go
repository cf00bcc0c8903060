package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/storetest"
)

// On a Cluster, a check of keys in two groups is two script calls. When
// the second denies, the first is refunded its limits without
// ChargeDenied only; when the first denies, the second's limits with
// ChargeDenied are charged by one more call, and without them it is not
// called at all.
func TestClusterChargeDeniedAcrossBuckets(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_CLUSTER_ADDRS"))
	clock := storetest.NewClock(storetest.Start)
	var o redisstore.Options
	redisstore.PinClock(&o, clock.Now)
	s := newStore(t, c, o)
	ctx := context.Background()

	charged := bouncer.Limit{Name: "charged", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute, ChargeDenied: true}
	plain := bouncer.Limit{Name: "plain", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute}
	tight := bouncer.Limit{Name: "tight", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 2}
	check := func(cost int64, keys ...bouncer.KeyLimits) bouncer.Decision {
		t.Helper()
		d, err := s.Check(ctx, bouncer.Request{Keys: keys, Cost: cost, Peek: cost == 0})
		if err != nil || d.Degraded {
			t.Fatalf("Check: %+v, %v", d, err)
		}
		return d
	}
	remaining := func(key string, l bouncer.Limit) int64 {
		t.Helper()
		return check(0, bouncer.KeyLimits{Key: key, Limits: []bouncer.Limit{l}}).Remaining
	}

	cases := []struct {
		name       string
		userLimits []bouncer.Limit
		ipFirst    bool
		calls      uint64 // script calls of the denied check
	}{
		{"user_then_ip", []bouncer.Limit{charged, plain}, false, 3}, // check, check, refund plain
		{"ip_then_user", []bouncer.Limit{charged, plain}, true, 2},  // check, charge charged
		{"user_then_ip_plain", []bouncer.Limit{plain}, false, 3},    // check, check, refund plain
		{"ip_then_user_plain", []bouncer.Limit{plain}, true, 1},     // check
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Keys of two groups: two script calls.
			user, ip := fmt.Sprintf("charge-user-%d", i), ""
			for j := 0; ip == "" || redisstore.GroupOf(user) == redisstore.GroupOf(ip); j++ {
				ip = fmt.Sprintf("charge-ip-%d-%d", i, j)
			}
			keys := []bouncer.KeyLimits{{Key: user, Limits: tc.userLimits}, {Key: ip, Limits: []bouncer.Limit{tight}}}
			if tc.ipFirst {
				keys[0], keys[1] = keys[1], keys[0]
			}
			check(2, bouncer.KeyLimits{Key: ip, Limits: []bouncer.Limit{tight}})
			before := s.Health().Calls
			if d := check(3, keys...); d.Allowed || d.Key != ip || d.LimitName != "tight" {
				t.Fatalf("got allowed %t by %q %q, want denied by %q %q", d.Allowed, d.Key, d.LimitName, ip, "tight")
			}
			if got := s.Health().Calls - before; got != tc.calls {
				t.Errorf("script calls: got %d, want %d", got, tc.calls)
			}
			for _, l := range tc.userLimits {
				want := l.Rate
				if l.ChargeDenied {
					want -= 3
				}
				if got := remaining(user, l); got != want {
					t.Errorf("%s: Remaining: got %d, want %d", l.Name, got, want)
				}
			}
		})
	}
}

// On a Cluster, a check of keys in two groups whose caller cancels after
// the first call was charged, before the second is sent: the first is
// refunded all the same, and the caller gets its error, not a decision.
func TestClusterCanceledBetweenCallsIsRefunded(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_CLUSTER_ADDRS"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reads atomic.Int64
	var o redisstore.Options
	// The clock is read as each call is encoded: the second call goes to
	// the client with ctx canceled.
	redisstore.PinClock(&o, func() time.Time {
		if reads.Add(1) == 2 {
			cancel()
		}
		return storetest.Start
	})
	// A deadline no loaded machine misses: the first call must be decided.
	o.Timeout = time.Minute
	s := newStore(t, c, o)

	l := bouncer.Limit{Name: "bucket", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 3}
	user, ip := "canceled-user", ""
	for j := 0; ip == "" || redisstore.GroupOf(user) == redisstore.GroupOf(ip); j++ {
		ip = fmt.Sprintf("canceled-ip-%d", j)
	}
	r := bouncer.Request{Cost: 1, Keys: []bouncer.KeyLimits{{Key: user, Limits: []bouncer.Limit{l}}, {Key: ip, Limits: []bouncer.Limit{l}}}}
	if d, err := s.Check(ctx, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("check canceled between its calls: %+v, %v; want an error wrapping context.Canceled", d, err)
	}
	if n := reads.Load(); n != 3 {
		t.Fatalf("%d calls encoded, want 3: the check's two and the refund of the first", n)
	}
	for _, key := range []string{user, ip} {
		d, err := s.Check(context.Background(), bouncer.Request{Peek: true, Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}})
		if err != nil || d.Degraded || d.Remaining != 3 {
			t.Errorf("%s after the canceled check: %+v, %v; want all 3 remaining, decided by Redis", key, d, err)
		}
	}
	if st := s.Health(); st.DegradedN != 0 || st.Failures != 0 || st.SlowN != 0 {
		t.Errorf("health %+v; want nothing degraded, failed or slow", st)
	}
}

// A limit's id names its state in Redis: charging denied checks packs the
// state differently, so it changes the id; and the id is stable, every
// instance computing it alike (it changes only with the layout of stored
// states: see limitID).
func TestLimitIDChargeDenied(t *testing.T) {
	plain := bouncer.Limit{Name: "minute", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute}
	charged := plain
	charged.ChargeDenied = true
	if got, want := redisstore.LimitID(plain), "8b3952d32afb"; got != want {
		t.Errorf("id of %v: got %s, want %s", plain, got, want)
	}
	if a, b := redisstore.LimitID(plain), redisstore.LimitID(charged); a == b {
		t.Errorf("%v and %v share the id %s", plain, charged, a)
	}
}
