package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
)

func testPeek(t *testing.T, newStore Factory) {
	for _, l := range exampleLimits() {
		t.Run(l.Name, func(t *testing.T) {
			h := newHarness(t, newStore)
			k := freshKey("peek")
			capacity := l.Capacity()
			expect(t, "fresh", h.peek(k, l), Want{Allowed: true, Remaining: capacity}, k, l)

			h.check(k, 2, l)
			first := h.peek(k, l)
			for i := range 3 {
				expect(t, fmt.Sprintf("peek %d after charging 2", i), h.peek(k, l), WantOf(first), k, l)
			}
			if first.Remaining != capacity-2 || first.ResetAfter <= 0 {
				t.Errorf("peek after charging 2: got %v, want remaining %d and a reset", WantOf(first), capacity-2)
			}

			h.check(k, capacity-2, l)
			d := h.peek(k, l)
			if !d.Allowed || d.Remaining != 0 || d.RetryAfter != 0 || d.Delay != 0 {
				t.Errorf("peek when exhausted: got %v, want allowed, remaining 0, no retry, no delay", WantOf(d))
			}
		})
	}
}

func testCostAboveCapacity(t *testing.T, newStore Factory) {
	for _, l := range exampleLimits() {
		t.Run(l.Name, func(t *testing.T) {
			h := newHarness(t, newStore)
			k := freshKey("never")
			capacity := l.Capacity()
			if l.ChargeDenied {
				// Denied, and charged: the limit is over.
				for _, cost := range []int64{capacity + 1, bouncer.MaxRate} {
					what := fmt.Sprintf("cost %d", cost)
					if d := h.check(k, cost, l); d.Allowed || d.Remaining != 0 || d.RetryAfter != bouncer.Never || d.ResetAfter <= 0 {
						t.Errorf("%s: got %v, want denied, remaining 0, a reset, retry never", what, WantOf(d))
					}
					if d := h.peek(k, l); d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter == bouncer.Never {
						t.Errorf("%s, then a peek: got %v, want denied, remaining 0, a retry", what, WantOf(d))
					}
				}
				return
			}
			for _, cost := range []int64{capacity + 1, bouncer.MaxRate} {
				what := fmt.Sprintf("fresh, cost %d", cost)
				expect(t, what, h.check(k, cost, l), Want{Remaining: capacity, RetryAfter: bouncer.Never}, k, l)
				h.wantRemaining(what, k, l, capacity)
			}

			h.check(k, 1, l)
			h.at(time.Millisecond)
			before := WantOf(h.peek(k, l))
			want := before
			want.Allowed, want.RetryAfter = false, bouncer.Never
			expect(t, "charged 1, cost above capacity", h.check(k, capacity+1, l), want, k, l)
			expect(t, "peek after", h.peek(k, l), before, k, l)
		})
	}
}

func testRefundCapped(t *testing.T, newStore Factory) {
	for _, l := range exampleLimits() {
		t.Run(l.Name, func(t *testing.T) {
			h := newHarness(t, newStore)
			capacity := l.Capacity()

			k := freshKey("refund")
			h.refund(k, capacity, l)
			if d := h.check(k, 1, l); d.Remaining != capacity-1 {
				t.Errorf("refund on a fresh key, then cost 1: Remaining: got %d, want %d", d.Remaining, capacity-1)
			}

			k = freshKey("refund")
			h.check(k, 2, l)
			h.refund(k, 5, l)
			h.wantRemaining("charged 2, refunded 5", k, l, capacity)
			if d := h.check(k, capacity+1, l); d.Allowed {
				t.Errorf("charged 2, refunded 5, cost capacity+1: got allowed, want denied")
			}
			h.check(k, capacity, l)
			if d := h.check(k, 1, l); d.Allowed {
				t.Errorf("charged 2, refunded 5, charged capacity, cost 1: got allowed, want denied")
			}
		})
	}
	t.Run("every_limit_of_the_key", func(t *testing.T) {
		h := newHarness(t, newStore)
		k := freshKey("refund")
		h.check(k, 4, perSecond, perMinute)
		h.refund(k, 3, perSecond, perMinute)
		h.wantRemaining("charged 4, refunded 3", k, perSecond, 9)
		h.wantRemaining("charged 4, refunded 3", k, perMinute, 14)
	})
}

// testExpiry checks that ResetAfter is exact: one nanosecond before it the
// key still differs from a fresh one, and from then on it decides as a
// fresh key does.
func testExpiry(t *testing.T, newStore Factory) {
	probe := []struct {
		after time.Duration
		cost  int64
	}{{0, 0}, {0, 2}, {0, 99}, {time.Millisecond, 0}, {150 * time.Millisecond, 3}, {0, 9}, {700 * time.Millisecond, 1}}
	for _, l := range exampleLimits() {
		t.Run(l.Name, func(t *testing.T) {
			h := newHarness(t, newStore)
			used, fresh := freshKey("used"), freshKey("fresh")
			h.check(used, 2, l)
			h.at(300 * time.Millisecond)
			d := h.check(used, 1, l)
			if !d.Allowed || d.ResetAfter <= 0 {
				t.Fatalf("charge at 300ms: got %v, want allowed with a reset", WantOf(d))
			}
			h.clock.Advance(d.ResetAfter - time.Nanosecond)
			if p := h.peek(used, l); p.ResetAfter != time.Nanosecond || p.Remaining == l.Capacity() {
				t.Errorf("1ns before ResetAfter %v: got %v, want reset 1ns, remaining below %d", d.ResetAfter, WantOf(p), l.Capacity())
			}
			h.clock.Advance(time.Nanosecond)
			for i, p := range probe {
				h.clock.Advance(p.after)
				got, want := h.check(used, p.cost, l), h.check(fresh, p.cost, l)
				if WantOf(got) != WantOf(want) {
					t.Errorf("probe %d (cost %d) after ResetAfter: got %v, want %v as on a fresh key", i, p.cost, WantOf(got), WantOf(want))
				}
			}
		})
	}
}

func testInvalidInput(t *testing.T, newStore Factory) {
	valid := perSecond
	badRate := bouncer.Limit{Name: "bad", Algorithm: bouncer.TokenBucket, Period: time.Second, Burst: 1}
	badAlgo := bouncer.Limit{Name: "bad", Rate: 1, Period: time.Second}
	burstOnWindow := bouncer.Limit{Name: "bad", Algorithm: bouncer.FixedWindow, Rate: 1, Period: time.Second, Burst: 3}
	one := func(key string, ls ...bouncer.Limit) []bouncer.KeyLimits {
		return []bouncer.KeyLimits{{Key: key, Limits: ls}}
	}
	cases := []struct {
		name string
		req  bouncer.Request
		want error
	}{
		{"zero_rate", bouncer.Request{Keys: one("k", badRate), Cost: 1}, bouncer.ErrInvalidLimit},
		{"unknown_algorithm", bouncer.Request{Keys: one("k", badAlgo), Cost: 1}, bouncer.ErrInvalidLimit},
		{"burst_on_window", bouncer.Request{Keys: one("k", burstOnWindow), Cost: 1}, bouncer.ErrInvalidLimit},
		{"second_limit_invalid", bouncer.Request{Keys: one("k", valid, badRate), Cost: 1}, bouncer.ErrInvalidLimit},
		{"second_key_invalid", bouncer.Request{Keys: append(one("k", valid), one("j", badRate)...), Cost: 1}, bouncer.ErrInvalidLimit},
		{"negative_cost", bouncer.Request{Keys: one("k", valid), Cost: -1}, bouncer.ErrInvalidRequest},
		{"no_keys", bouncer.Request{Cost: 1}, bouncer.ErrInvalidRequest},
		{"key_without_limits", bouncer.Request{Keys: one("k"), Cost: 1}, bouncer.ErrInvalidRequest},
		{"duplicate_limit_names", bouncer.Request{Keys: one("k", valid, valid), Cost: 1}, bouncer.ErrInvalidRequest},
		{"cost_forgotten", bouncer.Request{Keys: one("k", valid)}, bouncer.ErrInvalidRequest},
		{"peek_with_cost", bouncer.Request{Keys: one("k", valid), Cost: 1, Peek: true}, bouncer.ErrInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, newStore)
			err := noPanic(t, "Check", func() error {
				_, err := h.store.Check(context.Background(), c.req)
				return err
			})
			errorsIs(t, "Check", err, c.want)
			err = noPanic(t, "Refund", func() error { return h.store.Refund(context.Background(), c.req) })
			errorsIs(t, "Refund", err, c.want)
			h.wantRemaining("after a rejected request", "k", valid, valid.Capacity())
		})
	}
}

// noPanic runs f, reporting a panic as a test failure.
func noPanic(t *testing.T, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s panicked: %v", what, p)
		}
	}()
	return f()
}
