package storetest

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
)

// Limits that the multi-limit tests combine.
var (
	perSecond = bouncer.Limit{Name: "second", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 10}
	perMinute = bouncer.Limit{Name: "minute", Algorithm: bouncer.FixedWindow, Rate: 15, Period: time.Minute}
)

func testAllOrNothing(t *testing.T, newStore Factory) {
	t.Run("limits", func(t *testing.T) {
		h := newHarness(t, newStore)
		k := freshKey("aon")
		h.check(k, 10, perSecond, perMinute)
		if d := h.check(k, 1, perSecond, perMinute); d.Allowed || d.LimitName != "second" {
			t.Fatalf("check past the per-second limit: got allowed %t by %q, want denied by %q", d.Allowed, d.LimitName, "second")
		}
		h.wantRemaining("denied by second", k, perMinute, 5)
		h.wantRemaining("denied by second", k, perSecond, 0)

		h.at(time.Second)
		if d := h.check(k, 5, perSecond, perMinute); !d.Allowed {
			t.Fatalf("check within both limits: got denied by %q, want allowed", d.LimitName)
		}
		if d := h.check(k, 1, perSecond, perMinute); d.Allowed || d.LimitName != "minute" {
			t.Fatalf("check past the per-minute limit: got allowed %t by %q, want denied by %q", d.Allowed, d.LimitName, "minute")
		}
		h.wantRemaining("denied by minute", k, perSecond, 5)
		h.wantRemaining("denied by minute", k, perMinute, 0)
	})

	t.Run("keys", func(t *testing.T) {
		h := newHarness(t, newStore)
		a, b := freshKey("aon-a"), freshKey("aon-b")
		la := bouncer.Limit{Name: "a", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 5}
		lb := bouncer.Limit{Name: "b", Algorithm: bouncer.SlidingWindowLog, Rate: 3, Period: time.Hour}
		both := []bouncer.KeyLimits{{Key: a, Limits: []bouncer.Limit{la}}, {Key: b, Limits: []bouncer.Limit{lb}}}

		h.check(b, 3, lb)
		if d := h.checkKeys(1, both...); d.Allowed || d.Key != b {
			t.Fatalf("check with key b exhausted: got allowed %t by key %q, want denied by %q", d.Allowed, d.Key, b)
		}
		h.wantRemaining("denied by key b", a, la, 5)

		h.refund(b, 3, lb)
		h.check(a, 5, la)
		if d := h.checkKeys(1, both...); d.Allowed || d.Key != a {
			t.Fatalf("check with key a exhausted: got allowed %t by key %q, want denied by %q", d.Allowed, d.Key, a)
		}
		h.wantRemaining("denied by key a", b, lb, 3)
	})

	t.Run("cost_above_one_capacity", func(t *testing.T) {
		h := newHarness(t, newStore)
		k := freshKey("aon-never")
		d := h.check(k, 11, perSecond, perMinute) // fits the minute, never the second
		if d.Allowed || d.RetryAfter != bouncer.Never || d.LimitName != "second" {
			t.Fatalf("got allowed %t, retry %v by %q, want denied, never, by %q", d.Allowed, d.RetryAfter, d.LimitName, "second")
		}
		h.wantRemaining("cost above one capacity", k, perMinute, 15)
		h.wantRemaining("cost above one capacity", k, perSecond, 10)
	})
}

// bindingCase is a decision whose binding limit a test checks. Before run
// at the check's instant, setup charges the key.
type bindingCase struct {
	name   string
	at     time.Duration
	setup  func(h *harness, key string)
	cost   int64
	limits []bouncer.Limit
	want   bouncer.Decision // Key is filled in
}

func testBinding(t *testing.T, newStore Factory) {
	for _, c := range bindingCases() {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, newStore)
			key := freshKey("binding")
			if c.setup != nil {
				c.setup(h, key)
			}
			h.at(c.at)
			want := c.want
			want.Key = key
			if got := h.check(key, c.cost, c.limits...); got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}

	t.Run("across_keys", func(t *testing.T) {
		h := newHarness(t, newStore)
		user, ip := freshKey("user"), freshKey("ip")
		perUser := bouncer.Limit{Name: "per_user", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 10}
		perIP := bouncer.Limit{Name: "per_ip", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 3}
		got := h.checkKeys(1, bouncer.KeyLimits{Key: user, Limits: []bouncer.Limit{perUser}}, bouncer.KeyLimits{Key: ip, Limits: []bouncer.Limit{perIP}})
		want := bouncer.Decision{Allowed: true, Capacity: 3, Remaining: 2, ResetAfter: 100 * time.Millisecond, Key: ip, LimitName: "per_ip"}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
}

// bindingCases are testBinding's checks of one key under several limits:
// which limit binds the decision, and what it reports.
func bindingCases() []bindingCase {
	fast := bouncer.Limit{Name: "fast", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Second, Burst: 1}
	slow := bouncer.Limit{Name: "slow", Algorithm: bouncer.FixedWindow, Rate: 2, Period: time.Minute}
	big := bouncer.Limit{Name: "big", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute}
	small := bouncer.Limit{Name: "small", Algorithm: bouncer.FixedWindow, Rate: 6, Period: time.Minute}
	hourly := bouncer.Limit{Name: "hourly", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 3}
	tens := bouncer.Limit{Name: "tens", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute}
	shapeA := bouncer.Limit{Name: "a", Algorithm: bouncer.LeakyBucket, Rate: 10, Period: time.Second, Burst: 5, Shape: true}
	shapeB := bouncer.Limit{Name: "b", Algorithm: bouncer.LeakyBucket, Rate: 1, Period: time.Second, Burst: 5, Shape: true}
	charge := func(cost int64, l bouncer.Limit) func(*harness, string) {
		return func(h *harness, key string) { h.check(key, cost, l) }
	}
	cases := []bindingCase{
		{
			name: "least_remaining", cost: 1, limits: []bouncer.Limit{perSecond, perMinute},
			want: bouncer.Decision{Allowed: true, Capacity: 10, Remaining: 9, ResetAfter: 100 * time.Millisecond, LimitName: "second"},
		},
		{
			name: "least_remaining_after_refill", at: time.Second, cost: 1, limits: []bouncer.Limit{perSecond, perMinute},
			setup: func(h *harness, key string) { h.at(0); h.check(key, 10, perSecond, perMinute) },
			want:  bouncer.Decision{Allowed: true, Capacity: 15, Remaining: 4, ResetAfter: 59 * time.Second, LimitName: "minute"},
		},
		{
			name: "tie_goes_to_longer_reset", cost: 1, limits: []bouncer.Limit{perSecond, tens},
			want: bouncer.Decision{Allowed: true, Capacity: 10, Remaining: 9, ResetAfter: time.Minute, LimitName: "tens"},
		},
		{
			name: "tie_goes_to_longer_retry", at: 2500 * time.Millisecond, cost: 1, limits: []bouncer.Limit{fast, slow},
			setup: func(h *harness, key string) {
				h.at(0)
				h.check(key, 2, slow)
				h.at(2500 * time.Millisecond)
				h.check(key, 1, fast)
			},
			want: bouncer.Decision{Capacity: 2, ResetAfter: 57500 * time.Millisecond, RetryAfter: 57500 * time.Millisecond, LimitName: "slow"},
		},
		{
			// big denies with 5 left; small would allow, leaving 0, but is
			// not charged, so it still has 6: the denying limit binds.
			name: "denied_binds_a_denying_limit", cost: 6, limits: []bouncer.Limit{big, small},
			setup: charge(5, big),
			want:  bouncer.Decision{Capacity: 10, Remaining: 5, ResetAfter: time.Minute, RetryAfter: time.Minute, LimitName: "big"},
		},
		{
			// slow binds with 0 left; hourly, with 1 left, needs an hour.
			name: "retry_is_the_longest", cost: 2, limits: []bouncer.Limit{slow, hourly},
			setup: func(h *harness, key string) { h.check(key, 2, slow); h.check(key, 2, hourly) },
			want:  bouncer.Decision{Capacity: 2, ResetAfter: time.Minute, RetryAfter: time.Hour, LimitName: "slow"},
		},
		{
			name: "delay_is_the_longest", cost: 1, limits: []bouncer.Limit{shapeA, shapeB},
			setup: func(h *harness, key string) { h.check(key, 3, shapeA); h.check(key, 1, shapeB) },
			want:  bouncer.Decision{Allowed: true, Capacity: 5, Remaining: 1, ResetAfter: 400 * time.Millisecond, Delay: time.Second, LimitName: "a"},
		},
		{
			// Nothing is admitted, so nothing waits.
			name: "denied_has_no_delay", cost: 1, limits: []bouncer.Limit{shapeA, slow},
			setup: func(h *harness, key string) { h.check(key, 3, shapeA); h.check(key, 2, slow) },
			want:  bouncer.Decision{Capacity: 2, ResetAfter: time.Minute, RetryAfter: time.Minute, LimitName: "slow"},
		},
	}
	return cases
}

func testKeyIsolation(t *testing.T, newStore Factory) {
	// Stores treat keys as opaque bytes: none of these pairs share state.
	pairs := [][2]string{{"a", "b"}, {"user:1", "user:10"}, {"", "\x00"}, {"{c}", "c"}, {"k", "k "}}
	for _, l := range exampleLimits() {
		t.Run(l.Name, func(t *testing.T) {
			h := newHarness(t, newStore)
			for _, p := range pairs {
				a, b := p[0], p[1]
				h.check(a, l.Capacity(), l)
				h.wantRemaining("other key", b, l, l.Capacity())
				h.check(b, 1, l)
				h.wantRemaining("this key", a, l, 0)
			}
			k := freshKey("names")
			other := l
			other.Name = l.Name + "-other"
			h.check(k, l.Capacity(), l)
			h.wantRemaining("same key, other limit name", k, other, l.Capacity())
		})
	}
}
