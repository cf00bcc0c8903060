package hybrid_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

func (c *counting) Charge(ctx context.Context, r bouncer.Request) error {
	return c.Limiter.(store.Charger).Charge(ctx, r)
}

// A charge past a lease limit ends the instance's lease, giving a
// bucket's unspent units back, and charges the shared store: the next
// check is denied, as a strict limit's would be, until time pays the
// debt back.
func TestChargeLease(t *testing.T) {
	for _, l := range []bouncer.Limit{
		{Name: "b", Algorithm: bouncer.TokenBucket, Rate: 100, Period: time.Second, Burst: 50, Mode: bouncer.Lease},
		{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 50, Period: time.Second, Mode: bouncer.Lease},
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			f := newFleet(t, 1, hybrid.Options{})
			h := f.ins[0]
			// Demand grows the leases the instance takes: check until it
			// holds one with units left.
			for i := 0; h.Stats().UnitsParked == 0; i++ {
				if i == 40 {
					t.Fatal("no lease held after 40 checks; the test needs one")
				}
				f.clock.Advance(time.Millisecond)
				if d := check(t, h, one("k", 1, l)); !d.Allowed {
					t.Fatalf("warming the lease: %+v", d)
				}
			}
			if err := h.Charge(context.Background(), one("k", 2*l.Capacity(), l)); err != nil {
				t.Fatalf("Charge: %v", err)
			}
			if got := h.Stats().UnitsParked; got != 0 {
				t.Errorf("units parked after the charge: got %d, want 0 (the lease ended)", got)
			}
			if d := check(t, h, one("k", 1, l)); d.Allowed {
				t.Errorf("check after a charge of twice the capacity: got allowed (%+v), want denied", d)
			}
			strict := l
			strict.Mode = bouncer.Strict
			if d := check(t, f.shared, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{strict}}}, Peek: true}); d.Allowed && l.Algorithm.UsesBurst() {
				t.Errorf("the shared bucket after the charge: got %+v, want in debt", d)
			}
			f.clock.Advance(l.Period * 3)
			f.tick()
			if d := check(t, h, one("k", 1, l)); !d.Allowed {
				t.Errorf("three periods on, the debt paid: got %+v, want allowed", d)
			}
		})
	}
}

// A charge past an async limit charges the instance's view as well as
// the shared store, so that the instance admits nothing before its next
// sync, nor after it.
func TestChargeAsync(t *testing.T) {
	f := newFleet(t, 1, hybrid.Options{})
	h := f.ins[0]
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Hour, Mode: bouncer.Async}
	for range 3 {
		if d := check(t, h, one("k", 1, l)); !d.Allowed {
			t.Fatalf("check within the limit: %+v", d)
		}
	}
	if err := h.Charge(context.Background(), one("k", 20, l)); err != nil {
		t.Fatalf("Charge: %v", err)
	}
	if d := check(t, h, one("k", 1, l)); d.Allowed {
		t.Errorf("check after the charge, before a sync: got allowed, want denied")
	}
	f.tick()
	if d := check(t, h, one("k", 1, l)); d.Allowed {
		t.Errorf("check after the charge and a sync: got allowed, want denied")
	}
	f.clock.Advance(time.Hour)
	f.tick()
	if d := check(t, h, one("k", 1, l)); !d.Allowed {
		t.Errorf("the next window: got %+v, want allowed", d)
	}
}

// plainLimiter hides a store's Charge.
type plainLimiter struct{ bouncer.Limiter }

// A shared store that cannot charge makes Charge fail with
// errors.ErrUnsupported; a limit that cannot be charged is refused.
func TestChargeRefused(t *testing.T) {
	clock := storetest.NewClock(storetest.Start)
	ms := memstore.New(memstore.Options{Now: clock.Now})
	defer ms.Close()
	h := hybrid.New(plainLimiter{ms}, nil, hybrid.Options{Now: clock.Now, Manual: true})
	defer h.Close()
	l := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Hour}
	if err := h.Charge(context.Background(), one("k", 1, l)); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Charge with a shared store that cannot charge: got %v, want ErrUnsupported", err)
	}
	inflight := bouncer.Limit{Name: "c", Algorithm: bouncer.Concurrency, Rate: 2, Period: time.Minute}
	if err := h.Charge(context.Background(), one("k", 1, inflight)); !errors.Is(err, bouncer.ErrInvalidRequest) {
		t.Errorf("Charge of a concurrency limit: got %v, want ErrInvalidRequest", err)
	}
}
