package memstore_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
)

func request(l bouncer.Limit, cost int64) bouncer.Request {
	return bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{l}}}, Cost: cost, Peek: cost == 0}
}

// A store with the default clock decides like any other and stops its
// clock's goroutine on Close; it keeps working afterwards.
func TestDefaultClockDecidesAndCloses(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := memstore.New(memstore.Options{})
	l := bouncer.Limit{Name: "h", Algorithm: bouncer.TokenBucket, Rate: 3, Period: time.Hour, Burst: 3}
	for i, want := range []bool{true, true, true, false} {
		d, err := s.Check(context.Background(), request(l, 1))
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
	// After Close the store reads the exact clock, still holds state, and
	// starts no goroutine (goleak checks).
	d, err := s.Check(context.Background(), request(l, 1))
	if err != nil || d.Allowed {
		t.Fatalf("after Close: %+v, %v; want denied", d, err)
	}
}

// With a resolution of an hour the ticking clock stands still for the
// test: a limit whose interval is at least that sees frozen time, a faster
// limit reads the exact clock and sees time pass.
func TestClockChoiceByInterval(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := memstore.New(memstore.Options{Resolution: time.Hour})
	defer s.Close()
	ctx := context.Background()
	slow := bouncer.Limit{Name: "slow", Algorithm: bouncer.GCRA, Rate: 1, Period: 2 * time.Hour, Burst: 1}
	fast := bouncer.Limit{Name: "fast", Algorithm: bouncer.GCRA, Rate: 1, Period: 20 * time.Millisecond, Burst: 1}
	for _, l := range []bouncer.Limit{slow, fast} {
		if d, err := s.Check(ctx, request(l, 1)); err != nil || !d.Allowed {
			t.Fatalf("%s: first check %+v, %v", l.Name, d, err)
		}
	}
	peek := func(l bouncer.Limit) time.Duration {
		d, err := s.Check(ctx, request(l, 0))
		if err != nil {
			t.Fatal(err)
		}
		return d.ResetAfter
	}
	slow1, fast1 := peek(slow), peek(fast)
	time.Sleep(5 * time.Millisecond)
	slow2, fast2 := peek(slow), peek(fast)
	if slow2 != slow1 {
		t.Errorf("slow limit: ResetAfter went from %v to %v; want the ticking clock to stand still", slow1, slow2)
	}
	if fast2 >= fast1 {
		t.Errorf("fast limit: ResetAfter went from %v to %v; want the exact clock to move", fast1, fast2)
	}
	// The fast limit refills on the exact clock.
	time.Sleep(25 * time.Millisecond)
	if d, err := s.Check(ctx, request(fast, 1)); err != nil || !d.Allowed {
		t.Fatalf("fast limit after its interval: %+v, %v; want allowed", d, err)
	}
	if d, err := s.Check(ctx, request(slow, 1)); err != nil || d.Allowed {
		t.Fatalf("slow limit: %+v, %v; want denied", d, err)
	}
}

// A negative Resolution reads the exact clock on every check and starts
// no goroutine, even without Close.
func TestNegativeResolutionIsExact(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := memstore.New(memstore.Options{Resolution: -1})
	l := bouncer.Limit{Name: "slow", Algorithm: bouncer.GCRA, Rate: 1, Period: 2 * time.Hour, Burst: 1}
	d1, err := s.Check(context.Background(), request(l, 1))
	if err != nil || !d1.Allowed {
		t.Fatalf("%+v, %v", d1, err)
	}
	time.Sleep(2 * time.Millisecond)
	d2, _ := s.Check(context.Background(), request(l, 0))
	if d2.ResetAfter >= d1.ResetAfter {
		t.Fatalf("ResetAfter %v then %v; want the exact clock to move", d1.ResetAfter, d2.ResetAfter)
	}
}
