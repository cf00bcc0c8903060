package header_test

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
)

func TestForLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		l      bouncer.Limit
		limit  int64
		window time.Duration
		unit   string
	}{
		{"token_bucket: burst over the refill time", bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 20}, 20, 2 * time.Second, ""},
		{"gcra", bouncer.Limit{Algorithm: bouncer.GCRA, Rate: 50, Period: time.Minute, Burst: 100}, 100, 120 * time.Second, ""},
		{"leaky_bucket, a rounded interval", bouncer.Limit{Algorithm: bouncer.LeakyBucket, Rate: 3, Period: time.Second, Burst: 1}, 1, 333333334, ""},
		{"leaky_bucket shaping", bouncer.Limit{Algorithm: bouncer.LeakyBucket, Rate: 1, Period: time.Second, Burst: 5, Shape: true}, 5, 5 * time.Second, ""},
		{"fixed_window: rate per period", bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Minute}, 5, time.Minute, ""},
		{"sliding_window_log", bouncer.Limit{Algorithm: bouncer.SlidingWindowLog, Rate: 7, Period: time.Hour}, 7, time.Hour, ""},
		{"sliding_window_counter", bouncer.Limit{Algorithm: bouncer.SlidingWindowCounter, Rate: 7, Period: time.Hour}, 7, time.Hour, ""},
		{"concurrency: no window", bouncer.Limit{Algorithm: bouncer.Concurrency, Rate: 3, Period: 30 * time.Second}, 3, 0, header.ConcurrentRequests},
		{"a limit of 0", bouncer.Limit{Algorithm: bouncer.FixedWindow, Period: time.Minute}, 0, time.Minute, ""},
		{"the zero Limit", bouncer.Limit{}, 0, 0, ""},
		{"negative numbers", bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: -1, Period: -time.Second, Burst: -5}, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := header.ForLimit("p", tc.l)
			if v.Policy != "p" || v.Limit != tc.limit || v.Window != tc.window || v.QuotaUnit != tc.unit {
				t.Errorf("got policy %q, limit %d, window %v, unit %q; want p, %d, %v, %q", v.Policy, v.Limit, v.Window, v.QuotaUnit, tc.limit, tc.window, tc.unit)
			}
		})
	}
}

func TestDecided(t *testing.T) {
	bucket := header.ForLimit("b", bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 20})
	counter := header.ForLimit("c", bouncer.Limit{Algorithm: bouncer.SlidingWindowCounter, Rate: 5, Period: time.Minute})
	concurrency := header.ForLimit("n", bouncer.Limit{Algorithm: bouncer.Concurrency, Rate: 3, Period: time.Hour})
	for _, tc := range []struct {
		name         string
		v            header.Values
		d            bouncer.Decision
		remaining    int64
		reset, retry time.Duration
		denied       bool
	}{
		{"allowed", bucket, bouncer.Decision{Allowed: true, Remaining: 19, ResetAfter: 100 * time.Millisecond}, 19, 100 * time.Millisecond, 0, false},
		{"denied", bucket, bouncer.Decision{Remaining: 0, ResetAfter: 2 * time.Second, RetryAfter: 100 * time.Millisecond}, 0, 2 * time.Second, 100 * time.Millisecond, true},
		{"denied, never", bucket, bouncer.Decision{ResetAfter: time.Second, RetryAfter: bouncer.Never}, 0, time.Second, bouncer.Never, true},
		{"denied with no retry of its own: the reset", bucket, bouncer.Decision{ResetAfter: 1500 * time.Millisecond}, 0, 1500 * time.Millisecond, 1500 * time.Millisecond, true},
		{"remaining above the quota", bucket, bouncer.Decision{Allowed: true, Remaining: 50}, 20, 0, 0, false},
		{"negative remaining and reset", bucket, bouncer.Decision{Allowed: true, Remaining: -3, ResetAfter: -time.Second}, 0, 0, 0, false},
		{"a reset past the window", bucket, bouncer.Decision{Allowed: true, Remaining: 1, ResetAfter: time.Hour}, 1, 2 * time.Second, 0, false},
		{"a counter's reset capped at its window", counter, bouncer.Decision{Allowed: true, Remaining: 4, ResetAfter: 2 * time.Minute}, 4, time.Minute, 0, false},
		{"no window, no cap", concurrency, bouncer.Decision{Allowed: true, Remaining: 2, ResetAfter: time.Hour}, 2, time.Hour, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.v.Decided(tc.d)
			if got.Remaining != tc.remaining || got.Reset != tc.reset || got.RetryAfter != tc.retry || got.Denied != tc.denied {
				t.Errorf("got remaining %d, reset %v, retry %v, denied %v; want %d, %v, %v, %v",
					got.Remaining, got.Reset, got.RetryAfter, got.Denied, tc.remaining, tc.reset, tc.retry, tc.denied)
			}
			if got.Policy != tc.v.Policy || got.Limit != tc.v.Limit || got.Window != tc.v.Window || got.QuotaUnit != tc.v.QuotaUnit {
				t.Errorf("Decided changed the limit's fields: got %+v from %+v", got, tc.v)
			}
		})
	}
}
