package memstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
)

// TestChargeAllocs checks that a charge allocates nothing, lock-free on a
// key with state as well as under the locks for several keys.
func TestChargeAllocs(t *testing.T) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	ctx := context.Background()
	tb := bouncer.Limit{Name: "tb", Algorithm: bouncer.TokenBucket, Rate: 100, Period: time.Second, Burst: 1 << 30}
	fw := bouncer.Limit{Name: "fw", Algorithm: bouncer.FixedWindow, Rate: bouncer.MaxRate, Period: bouncer.MaxPeriod}
	for _, tt := range []struct {
		name string
		r    bouncer.Request
	}{
		{"one key, one limit", bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "a", Limits: []bouncer.Limit{tb}}}, Cost: 1}},
		{"two keys, two limits", bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "a", Limits: []bouncer.Limit{tb, fw}}, {Key: "b", Limits: []bouncer.Limit{fw}}}, Cost: 1}},
	} {
		if err := s.Charge(ctx, tt.r); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = s.Charge(ctx, tt.r) }); n != 0 {
			t.Errorf("%s: %v allocations per charge, want 0", tt.name, n)
		}
	}
}

// TestChargeConcurrent charges and checks one key from many goroutines:
// every unit charged or admitted is counted, none twice.
func TestChargeConcurrent(t *testing.T) {
	ctx := context.Background()
	const workers, rounds = 8, 200
	for _, l := range []bouncer.Limit{
		{Name: "tb", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Second, Burst: 1 << 20},
		{Name: "fw", Algorithm: bouncer.FixedWindow, Rate: 1 << 20, Period: bouncer.MaxPeriod},
		{Name: "swl", Algorithm: bouncer.SlidingWindowLog, Rate: 1 << 20, Period: time.Hour},
	} {
		t.Run(l.Name, func(t *testing.T) {
			// A stopped clock: nothing refills or leaves meanwhile.
			start := time.Unix(1_700_000_000, 0)
			s := memstore.New(memstore.Options{Now: func() time.Time { return start }})
			defer s.Close()
			key := []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{l}}}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for range rounds {
						var err error
						if w%2 == 0 {
							err = s.Charge(ctx, bouncer.Request{Keys: key, Cost: 3})
						} else {
							var d bouncer.Decision
							d, err = s.Check(ctx, bouncer.Request{Keys: key, Cost: 1})
							if err == nil && !d.Allowed {
								t.Errorf("check denied: %+v", d)
							}
						}
						if err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			d, err := s.Check(ctx, bouncer.Request{Keys: key, Peek: true})
			if err != nil {
				t.Fatal(err)
			}
			// Half the workers charge 3 a round, half check 1.
			if want := l.Capacity() - workers/2*rounds*4; d.Remaining != want {
				t.Errorf("after the run: Remaining %d, want %d", d.Remaining, want)
			}
		})
	}
}
