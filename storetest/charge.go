package storetest

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
)

// The limits of testChargeDenied.
var (
	charged = bouncer.Limit{Name: "charged", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute, ChargeDenied: true}
	plain   = bouncer.Limit{Name: "plain", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute}
	tight   = bouncer.Limit{Name: "tight", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 2}
	counter = bouncer.Limit{Name: "counter", Algorithm: bouncer.SlidingWindowCounter, Rate: 10, Period: time.Minute, ChargeDenied: true}
)

// testChargeDenied checks that a denied check charges the limits with
// ChargeDenied, of every key, and only them.
func testChargeDenied(t *testing.T, newStore Factory) {
	t.Run("limits", func(t *testing.T) { testChargeDeniedLimits(t, newStore) })
	// On a Redis Cluster, keys of different buckets are charged in turn:
	// either order must charge the other key's ChargeDenied limit.
	for _, order := range []string{"denying_key_last", "denying_key_first"} {
		t.Run("keys/"+order, func(t *testing.T) { testChargeDeniedKeys(t, newStore, order == "denying_key_first") })
	}
	t.Run("peek_charges_nothing", func(t *testing.T) {
		h := newHarness(t, newStore)
		k := freshKey("charge-peek")
		h.check(k, 2, tight)
		for range 3 {
			if d := h.check(k, 0, charged, counter, tight); !d.Allowed {
				t.Fatalf("peek: got denied by %q, want allowed", d.LimitName)
			}
		}
		h.wantRemaining("after peeks", k, charged, 10)
		h.wantRemaining("after peeks", k, counter, 10)
	})
}

// testChargeDeniedLimits charges the limits of one key.
func testChargeDeniedLimits(t *testing.T, newStore Factory) {
	h := newHarness(t, newStore)
	k := freshKey("charge")
	if d := h.check(k, 2, tight, charged, plain, counter); !d.Allowed {
		t.Fatalf("check within every limit: got denied by %q, want allowed", d.LimitName)
	}
	d := h.check(k, 1, tight, charged, plain, counter)
	want := bouncer.Decision{Capacity: 2, RetryAfter: time.Hour, ResetAfter: 2 * time.Hour, Key: k, LimitName: "tight"}
	if d != want {
		t.Fatalf("check past tight: got %+v, want %+v", d, want)
	}
	h.wantRemaining("denied by tight", k, charged, 7)
	h.wantRemaining("denied by tight", k, counter, 7)
	h.wantRemaining("denied by tight", k, plain, 8)
	h.wantRemaining("denied by tight", k, tight, 0)

	// Denied by charged itself, which is charged to over; plain,
	// which would allow, is not charged.
	d = h.check(k, 8, charged, plain)
	want = bouncer.Decision{Capacity: 10, ResetAfter: time.Minute, RetryAfter: time.Minute, Key: k, LimitName: "charged"}
	if d != want {
		t.Fatalf("check past charged: got %+v, want %+v", d, want)
	}
	h.wantRemaining("denied by charged", k, plain, 8)
	expect(t, "peek at charged, over", h.peek(k, charged), Want{ResetAfter: time.Minute, RetryAfter: time.Minute}, k, charged)
	if d := h.check(k, 1, plain, charged); d.Allowed || d.LimitName != "charged" {
		t.Errorf("check of plain and charged, over: got allowed %t by %q, want denied by %q", d.Allowed, d.LimitName, "charged")
	}
	h.wantRemaining("denied by charged again", k, plain, 8)

	h.at(time.Minute)
	h.wantRemaining("next window", k, charged, 10)
	h.wantRemaining("next window", k, plain, 10)
}

// testChargeDeniedKeys charges a user's and an IP's limits together, the
// denying key first or last.
func testChargeDeniedKeys(t *testing.T, newStore Factory, denyingFirst bool) {
	h := newHarness(t, newStore)
	user, ip := freshKey("charge-user"), freshKey("charge-ip")
	keys := []bouncer.KeyLimits{{Key: user, Limits: []bouncer.Limit{charged, plain, counter}}, {Key: ip, Limits: []bouncer.Limit{tight}}}
	if denyingFirst {
		keys[0], keys[1] = keys[1], keys[0]
	}
	h.check(ip, 2, tight)
	if d := h.checkKeys(3, keys...); d.Allowed || d.Key != ip || d.LimitName != "tight" {
		t.Fatalf("check with ip exhausted: got allowed %t by %q %q, want denied by %q %q", d.Allowed, d.Key, d.LimitName, ip, "tight")
	}
	h.wantRemaining("denied by ip", user, charged, 7)
	h.wantRemaining("denied by ip", user, counter, 7)
	h.wantRemaining("denied by ip", user, plain, 10)
	h.wantRemaining("denied by ip", ip, tight, 0)

	// A check that the user key denies leaves tight as it was.
	h.check(user, 7, charged)
	h.refund(ip, 2, tight)
	if d := h.checkKeys(1, keys...); d.Allowed || d.Key != user || d.LimitName != "charged" {
		t.Fatalf("check with charged full: got allowed %t by %q %q, want denied by %q %q", d.Allowed, d.Key, d.LimitName, user, "charged")
	}
	h.wantRemaining("denied by user", ip, tight, 2)
	h.wantRemaining("denied by user", user, plain, 10)
	h.wantRemaining("denied by user", user, counter, 6)
	expect(t, "peek at charged, over", h.peek(user, charged), Want{ResetAfter: time.Minute, RetryAfter: time.Minute}, user, charged)
}
