package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

func TestValidateCharge(t *testing.T) {
	tb := bouncer.Limit{Name: "tb", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 10}
	shape := bouncer.Limit{Name: "shape", Algorithm: bouncer.LeakyBucket, Rate: 10, Period: time.Second, Burst: 10, Shape: true}
	conc := bouncer.Limit{Name: "conc", Algorithm: bouncer.Concurrency, Rate: 10, Period: time.Second}
	police := bouncer.Limit{Name: "police", Algorithm: bouncer.LeakyBucket, Rate: 10, Period: time.Second, Burst: 10}
	req := func(cost int64, peek bool, ls ...bouncer.Limit) bouncer.Request {
		return bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: ls}}, Cost: cost, Peek: peek}
	}
	for _, tc := range []struct {
		name string
		r    bouncer.Request
		want error
	}{
		{"token bucket", req(3, false, tb), nil},
		{"policing leaky bucket", req(3, false, police), nil},
		{"peek", req(0, true, tb), bouncer.ErrInvalidRequest},
		{"shaping leaky bucket", req(1, false, tb, shape), bouncer.ErrInvalidRequest},
		{"concurrency", req(1, false, conc), bouncer.ErrInvalidRequest},
		{"invalid limit", req(1, false, bouncer.Limit{Name: "bad", Algorithm: bouncer.TokenBucket}), bouncer.ErrInvalidLimit},
		{"no keys", bouncer.Request{Cost: 1}, bouncer.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := store.ValidateCharge(tc.r)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestChargeable(t *testing.T) {
	for _, tc := range []struct {
		l    bouncer.Limit
		want bool
	}{
		{bouncer.Limit{Algorithm: bouncer.GCRA}, true},
		{bouncer.Limit{Algorithm: bouncer.FixedWindow}, true},
		{bouncer.Limit{Algorithm: bouncer.LeakyBucket}, true},
		{bouncer.Limit{Algorithm: bouncer.LeakyBucket, Shape: true}, false},
		{bouncer.Limit{Algorithm: bouncer.Concurrency}, false},
		{bouncer.Limit{}, false},
	} {
		if got := store.Chargeable(tc.l); got != tc.want {
			t.Errorf("Chargeable(%v): got %v, want %v", tc.l, got, tc.want)
		}
	}
}
