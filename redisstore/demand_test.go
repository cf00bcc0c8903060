package redisstore_test

import (
	"context"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/redisstore"
)

// Two stores on one Redis see each other's clients' demands for a
// bucket, and not other buckets'; a forgotten or expired record is gone.
func TestShareDemand(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		prefix := freshPrefix()
		a := newStore(t, c, redisstore.Options{Prefix: prefix})
		b := newStore(t, c, redisstore.Options{Prefix: prefix})
		ctx := context.Background()
		if _, err := a.ShareDemand(ctx, "bucket", "a1", 2.5, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ShareDemand(ctx, "other", "a1", 9, time.Minute); err != nil {
			t.Fatal(err)
		}
		got, err := b.ShareDemand(ctx, "bucket", "b1", math.Inf(1), time.Minute)
		if want := map[string]float64{"a1": 2.5, "b1": math.Inf(1)}; err != nil || !maps.Equal(got, want) {
			t.Fatalf("b's view: %v, %v; want %v", got, err, want)
		}
		if err := a.ForgetDemand(ctx, "bucket", "a1"); err != nil {
			t.Fatal(err)
		}
		// A record of a millisecond has expired by the next call that
		// reads it, on Redis's clock: one more call takes longer than
		// that, and the script reads the time after its own round trip.
		if _, err := a.ShareDemand(ctx, "bucket", "short", 1, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		for {
			got, err = b.ShareDemand(ctx, "bucket", "b1", 1, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := got["short"]; !ok {
				break
			}
		}
		if want := map[string]float64{"b1": 1}; !maps.Equal(got, want) {
			t.Errorf("after a forget and an expiry: %v, want %v", got, want)
		}
	})
}
