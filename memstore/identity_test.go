package memstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
)

// A limit's counts do not depend on its OnStoreError policy or Mode, which says
// what to do when a shared store fails: a config that changes only the
// policy keeps its counts, as in the Redis store. With few limits in a
// shard and with many (a map then).
func TestPolicyIsNotIdentity(t *testing.T) {
	for _, others := range []int{0, 12} {
		t.Run(fmt.Sprintf("%d other limits", others), func(t *testing.T) {
			s := memstore.New(memstore.Options{Now: (&fakeClock{t: start}).Now, Shards: 1})
			defer s.Close()
			for i := range others {
				check(t, s, "k", 1, bouncer.Limit{Name: fmt.Sprint("other", i), Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Hour})
			}
			l := bouncer.Limit{Name: "l", Algorithm: bouncer.FixedWindow, Rate: 3, Period: time.Hour}
			policies := []bouncer.StoreErrorPolicy{bouncer.StoreErrorDefault, bouncer.StoreErrorAllow, bouncer.StoreErrorDeny, bouncer.StoreErrorLocal}
			for i, p := range policies {
				l.OnStoreError = p
				d := check(t, s, "k", 1, l)
				if want := i < 3; d.Allowed != want {
					t.Errorf("check %d (policy %v): allowed %v, want %v: the policy changed, not the count", i+1, p, d.Allowed, want)
				}
			}
			// Nor on its Mode, which says how a hybrid limiter shares it.
			l.OnStoreError = bouncer.StoreErrorDefault
			l.Mode = bouncer.Lease
			if d := check(t, s, "k", 1, l); d.Allowed || d.Remaining != 0 {
				t.Errorf("lease mode: got %+v, want the same count (over)", d)
			}
			l.Mode = bouncer.Strict
			// A limit that counts otherwise has counts of its own.
			l.Rate = 4
			if d := check(t, s, "k", 1, l); !d.Allowed || d.Remaining != 3 {
				t.Errorf("another rate: got %+v, want a fresh count (3 left)", d)
			}
		})
	}
}
