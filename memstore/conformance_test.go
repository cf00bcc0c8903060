package memstore_test

import (
	"testing"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
		return memstore.New(memstore.Options{Now: clock.Now})
	})
}

// TestConformanceOneShard runs the suite with every key in one shard, so
// that checks on several keys take the single-lock path.
func TestConformanceOneShard(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
		return memstore.New(memstore.Options{Now: clock.Now, Shards: 1})
	})
}

func TestSharesConformance(t *testing.T) {
	storetest.Shares(t, func(t *testing.T, clock *storetest.Clock) store.Sharer {
		return memstore.New(memstore.Options{Now: clock.Now})
	})
}
