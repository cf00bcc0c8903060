package algo_test

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/storetest"
)

// TestChargeBounds checks the edges of each debt: a bucket's stops at Far
// ticks ahead without overflowing and is refunded exactly, a window's
// saturates, a log's entries stay at most Rate+1, and the limits that
// cannot be charged are left as they were.
func TestChargeBounds(t *testing.T) {
	now := storetest.Start.UnixNano()
	t.Run("bucket_far", func(t *testing.T) {
		for _, l := range []bouncer.Limit{
			{Algorithm: bouncer.GCRA, Rate: 1, Period: bouncer.MaxPeriod, Burst: 1},
			{Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 10},
			{Algorithm: bouncer.LeakyBucket, Rate: 10, Period: time.Second, Burst: 5},
		} {
			p := algo.Prepare(l)
			far := p.MaxDebt()
			var s algo.State
			for range 3 {
				s = p.Charge(s, now, bouncer.MaxRate)
			}
			if got := s.T - now; got != far {
				t.Fatalf("%v: charged far past: state %d ahead of now, want MaxDebt, %d", l, got, far)
			}
			_, r := p.Check(s, now, 1)
			if r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || r.RetryAfter == bouncer.Never {
				t.Fatalf("%v: check in the deepest debt: got %+v, want denied, 0 remaining, a finite retry", l, r)
			}
			if s = p.Refund(s, now, bouncer.MaxRate); s.T != now {
				t.Fatalf("%v: refund of more than the debt: state %d from now, want now", l, s.T-now)
			}
		}
	})
	t.Run("windows_saturate", func(t *testing.T) {
		for _, l := range []bouncer.Limit{
			{Algorithm: bouncer.FixedWindow, Rate: 3, Period: time.Second},
			{Algorithm: bouncer.FixedWindow, Rate: 3, Period: time.Second, ChargeDenied: true},
			{Algorithm: bouncer.SlidingWindowCounter, Rate: 3, Period: time.Second},
			{Algorithm: bouncer.SlidingWindowCounter, Rate: bouncer.MaxRate, Period: time.Hour},
		} {
			s := algo.Charge(l, algo.State{}, now, bouncer.MaxRate)
			s = algo.Charge(l, s, now, bouncer.MaxRate)
			_, r := algo.Check(l, s, now, 1)
			if r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || l.Algorithm == bouncer.FixedWindow && r.RetryAfter != time.Second {
				t.Fatalf("%v: a check in debt: got %+v, want denied (a fixed window until it ends)", l, r)
			}
			s = algo.Refund(l, s, now, l.Rate+1)
			if _, r := algo.Check(l, s, now, 0); r.Remaining != l.Rate {
				t.Fatalf("%v: a refund of Rate after a saturated debt: Remaining %d, want %d (the debt past a full window is not kept)", l, r.Remaining, l.Rate)
			}
		}
	})
	t.Run("log_entries", func(t *testing.T) {
		l := bouncer.Limit{Algorithm: bouncer.SlidingWindowLog, Rate: 3, Period: time.Second}
		var s algo.State
		for i := range 100 {
			s = algo.Charge(l, s, now+int64(i), 2)
		}
		if len(s.Log) > int(l.Rate)+1 {
			t.Fatalf("after 100 charges: %d entries, want at most Rate+1 = %d", len(s.Log), l.Rate+1)
		}
		if _, r := algo.Check(l, s, now+99, 0); r.Allowed || r.RetryAfter != time.Second {
			// The newest entry holds the charges merged into it, at 99ns.
			t.Fatalf("peek after the charges: got %+v, want denied until the newest entry leaves, 1s", r)
		}
		if _, r := algo.Check(l, s, now+99+int64(time.Second), 1); !r.Allowed {
			t.Fatalf("a period after the last charge: got %+v, want allowed", r)
		}
	})
	t.Run("not_chargeable", func(t *testing.T) {
		for _, l := range []bouncer.Limit{
			{Algorithm: bouncer.Concurrency, Rate: 3, Period: time.Second},
			{Algorithm: bouncer.LeakyBucket, Rate: 3, Period: time.Second, Burst: 2, Shape: true},
		} {
			s, _ := algo.Check(l, algo.State{}, now, 1)
			if got := algo.Charge(l, s, now, 5); got.T != s.T || len(got.Log) != len(s.Log) {
				t.Errorf("%v: Charge changed the state from %+v to %+v, want it kept", l, s, got)
			}
		}
	})
}
