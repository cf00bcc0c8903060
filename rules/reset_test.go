package rules_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/rules"
)

const planFile = `domain: s
plans: {key: plan}
rules:
  - name: user
    match: [{key: user}]
    algorithm: fixed_window
    limits: [{name: per_day, rate: 1000, period: 1d}]
    plans:
      pro: {limits: [{name: per_day, rate: 100000, period: 1d}, {name: per_second, rate: 50, period: 1s}]}
      free: {unlimited: true}
`

// A reset forgets every limit a key has, each plan's included, in both
// stores (Redis when BOUNCER_REDIS_ADDR names one; see redistest).
func TestResetEveryPlan(t *testing.T) {
	c, err := rules.Parse("s.yaml", []byte(planFile))
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]func(t *testing.T) bouncer.Limiter{
		"memstore": func(t *testing.T) bouncer.Limiter {
			st := memstore.New(memstore.Options{})
			t.Cleanup(func() { st.Close() })
			return st
		},
		"redisstore": func(t *testing.T) bouncer.Limiter {
			addr := redistest.Addr(t)
			// A deadline no loaded machine misses: a check decided by
			// policy would be counted in the local store, not in Redis.
			st, err := redisstore.New(redisstore.Options{URL: "redis://" + addr, Timeout: 10 * time.Second,
				Prefix: "reset-every-plan-" + strconv.FormatInt(time.Now().UnixNano(), 36)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			// New waits a second for Redis; a loaded machine may take
			// longer to connect.
			deadline := time.Now().Add(10 * time.Second)
			for !st.Health().Connected {
				if time.Now().After(deadline) {
					t.Fatal("not connected to Redis after 10s")
				}
				time.Sleep(5 * time.Millisecond)
			}
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			e := rules.NewEngine(c, open(t))
			ctx := context.Background()
			request := func(entries ...rules.Entry) {
				t.Helper()
				resp, err := e.Decide(ctx, rules.Request{Domain: "s", Descriptors: []rules.Descriptor{{Entries: entries}}})
				if err != nil {
					t.Fatal(err)
				}
				if resp.Degraded() {
					t.Fatalf("%v: decided by policy, not by the store", entries)
				}
			}
			alice, pro := rules.Entry{Key: "user", Value: "alice"}, rules.Entry{Key: "plan", Value: "pro"}
			request(alice)
			request(alice, pro)
			k, err := e.Resolve("s", []rules.Entry{alice})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(k.AllLimits()); got != 2 {
				t.Errorf("AllLimits: got %d sets, want 2 (the rule's, pro's; free is unlimited)", got)
			}
			remaining := func() map[string]int64 {
				out := map[string]int64{}
				for _, ls := range k.AllLimits() {
					states, err := e.State(ctx, rules.KeyInfo{Key: k.Key, Limits: ls})
					if err != nil {
						t.Fatal(err)
					}
					for _, s := range states {
						out[s.Limit.Name+"/"+strconv.FormatInt(s.Limit.Rate, 10)] = s.Remaining
					}
				}
				return out
			}
			before := remaining()
			if before["per_day/100000"] != 99999 || before["per_day/1000"] != 999 {
				t.Fatalf("before the reset: got %v, want 999 and 99999 left of the two per_day", before)
			}
			if err := e.Reset(ctx, k); err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{"per_day/1000": 1000, "per_day/100000": 100000, "per_second/50": 50}
			got := remaining()
			for l, n := range want {
				if got[l] != n {
					t.Errorf("after the reset, %s: got %d remaining, want %d", l, got[l], n)
				}
			}
		})
	}
}
