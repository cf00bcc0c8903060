package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
)

// A store with a Resolution decides like any other and stops its
// goroutine on Close (TestMain checks that no goroutine is left).
func TestResolutionStoreDecidesAndCloses(t *testing.T) {
	s := memstore.New(memstore.Options{Resolution: time.Millisecond})
	l := bouncer.Limit{Name: "h", Algorithm: bouncer.TokenBucket, Rate: 3, Period: time.Hour, Burst: 3}
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{l}}}, Cost: 1}
	for i, want := range []bool{true, true, true, false} {
		d, err := s.Check(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want {
			t.Fatalf("check %d: Allowed = %v, want %v", i, d.Allowed, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// After Close the store reads the exact clock and still holds state.
	d, err := s.Check(context.Background(), req)
	if err != nil || d.Allowed {
		t.Fatalf("after Close: %+v, %v; want denied", d, err)
	}
}
