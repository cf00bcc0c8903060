package redisstore_test

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
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
