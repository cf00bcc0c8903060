package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

// The whole conformance suite, with the scripts' time pinned to the
// suite's fake clock, on a real standalone server and a real Cluster.
func TestConformance(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
			var o redisstore.Options
			redisstore.PinClock(&o, clock.Now)
			return newStore(t, c, o)
		})
	})
}

// The key contract: every key the library touches is one of its call's
// KEYS. The suite runs again on a library whose every command about a key
// fails unless the key was declared (GuardKeys), so that a script that
// reached for another would fail a check; a reset of each limit runs on it
// too.
func TestScriptsDeclareEveryKey(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
			var o redisstore.Options
			redisstore.PinClock(&o, clock.Now)
			redisstore.GuardKeys(&o)
			return newStore(t, c, o)
		})
		var o redisstore.Options
		redisstore.GuardKeys(&o)
		s := newStore(t, c, o)
		for _, sc := range storetest.Scenarios() {
			r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "guarded", Limits: []bouncer.Limit{sc.Limit}}}, Cost: 1}
			if d, err := s.Check(t.Context(), r); err != nil || d.Degraded {
				t.Fatalf("%s: check: %+v, %v", sc.Name, d, err)
			}
			if err := s.Reset(t.Context(), r); err != nil {
				t.Fatalf("%s: reset: %v", sc.Name, err)
			}
		}
	})
}

// The store.Sharer suite, with the library's time pinned to the suite's
// clock, on a real standalone server and a real Cluster; and again on a
// library that refuses a key not among its call's KEYS (GuardKeys).
func TestSharesConformance(t *testing.T) {
	for _, guarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("guarded=%v", guarded), func(t *testing.T) {
			forEachTopology(t, func(t *testing.T, c rueidis.Client) {
				storetest.Shares(t, func(t *testing.T, clock *storetest.Clock) store.Sharer {
					var o redisstore.Options
					redisstore.PinClock(&o, clock.Now)
					if guarded {
						redisstore.GuardKeys(&o)
					}
					return newStore(t, c, o)
				})
			})
		})
	}
}
