package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// hasCharge reports whether a scenario charges (store.Charger).
func hasCharge(sc Scenario) bool {
	for _, st := range sc.Steps {
		if st.Charge {
			return true
		}
	}
	return false
}

// charger returns the store as a store.Charger, or skips the test.
func (h *harness) charger() store.Charger {
	h.t.Helper()
	c, ok := h.store.(store.Charger)
	if !ok {
		h.t.Skipf("storetest: %T does not implement store.Charger: the settle steps are skipped", h.store)
	}
	return c
}

// charge charges n to key's limits, past them if need be.
func (h *harness) charge(key string, n int64, limits ...bouncer.Limit) {
	h.t.Helper()
	r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: limits}}, Cost: n}
	if err := h.charger().Charge(context.Background(), r); err != nil {
		h.t.Fatalf("Charge(%d, %q): %v", n, key, err)
	}
}

// settle reserves estimate on key's limit l with a check, which must
// allow, and settles it at actual with bouncer.Settle.
func (h *harness) settle(key string, l bouncer.Limit, estimate, actual int64) bouncer.Decision {
	h.t.Helper()
	r := request(estimate, bouncer.KeyLimits{Key: key, Limits: []bouncer.Limit{l}})
	d, err := h.store.Check(context.Background(), r)
	if err != nil || !d.Allowed {
		h.t.Fatalf("reserve %d on %q %q: got %+v, %v, want allowed", estimate, key, l.Name, d, err)
	}
	if err := bouncer.Settle(context.Background(), h.store, r, d, actual); err != nil {
		h.t.Fatalf("Settle(%q %q, estimate %d, actual %d): %v", key, l.Name, estimate, actual, err)
	}
	return d
}

// testSettle checks reserve-then-settle on every algorithm that can be
// charged, step by step against its Model, and that the others refuse.
func testSettle(t *testing.T, newStore Factory) {
	for _, l := range exampleLimits() {
		if l.Algorithm == bouncer.Concurrency || l.Shape {
			continue
		}
		t.Run("debt/"+l.Name, func(t *testing.T) { testDebt(t, newStore, l) })
		t.Run("settle_after_refund/"+l.Name, func(t *testing.T) { testSettleAfterRefund(t, newStore, l) })
	}
	t.Run("denied_reservation", func(t *testing.T) { testSettleDenied(t, newStore) })
	t.Run("refused", func(t *testing.T) { testChargeRefused(t, newStore) })
	t.Run("keys", func(t *testing.T) { testChargeKeys(t, newStore) })
}

// modelled runs the steps of one key on a store and on l's Model,
// failing when a decision differs.
type modelled struct {
	h   *harness
	m   Model
	l   bouncer.Limit
	key string
	at  time.Duration
}

func newModelled(t *testing.T, newStore Factory, l bouncer.Limit) *modelled {
	h := newHarness(t, newStore)
	h.charger()
	return &modelled{h: h, m: NewModel(l), l: l, key: freshKey("settle")}
}

func (x *modelled) now() int64 { return Start.Add(x.at).UnixNano() }

func (x *modelled) advance(d time.Duration) {
	x.at += d
	x.h.at(x.at)
}

func (x *modelled) check(what string, cost int64) bouncer.Decision {
	x.h.t.Helper()
	d := x.h.check(x.key, cost, x.l)
	expect(x.h.t, fmt.Sprintf("%s (at %v, cost %d)", what, x.at, cost), d, x.m.Check(x.now(), cost), x.key, x.l)
	return d
}

// settle reserves estimate and settles it at actual on the store and the
// model alike.
func (x *modelled) settle(estimate, actual int64) {
	x.h.t.Helper()
	x.h.settle(x.key, x.l, estimate, actual)
	x.m.Check(x.now(), estimate)
	if actual > estimate {
		x.m.Charge(x.now(), actual-estimate)
	} else {
		x.m.Refund(x.now(), estimate-actual)
	}
}

func (x *modelled) refund(n int64) {
	x.h.t.Helper()
	x.h.refund(x.key, n, x.l)
	x.m.Refund(x.now(), n)
}

// testDebt settles a reservation far past the limit: checks are denied,
// with Remaining 0, until the RetryAfter they report, when time has paid
// the debt back.
func testDebt(t *testing.T, newStore Factory, l bouncer.Limit) {
	x := newModelled(t, newStore, l)
	capacity := l.Capacity()
	x.settle(2, 2*capacity+1)
	d := x.check("in debt", 1)
	if d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter == bouncer.Never {
		t.Fatalf("in debt: got allowed %t, remaining %d, retry %v; want denied, 0 remaining, a finite retry", d.Allowed, d.Remaining, d.RetryAfter)
	}
	if d.ResetAfter < d.RetryAfter && l.Algorithm != bouncer.SlidingWindowCounter {
		t.Errorf("in debt: ResetAfter %v before RetryAfter %v", d.ResetAfter, d.RetryAfter)
	}
	retry := d.RetryAfter
	x.advance(retry - 1)
	if l.ChargeDenied {
		x.check("a nanosecond before the retry", 0) // a denied check would be charged
	} else {
		x.check("a nanosecond before the retry", 1)
	}
	x.advance(1)
	if d := x.check("at the retry", 1); !d.Allowed {
		t.Fatalf("at the RetryAfter %v of the debt: got denied (retry %v), want allowed", retry, d.RetryAfter)
	}
	x.advance(3 * l.Period)
	x.check("paid back", 0)
}

// testSettleAfterRefund settles below the estimate (a refund), then past
// it after part of the reservation was refunded, then refunds part of the
// debt.
func testSettleAfterRefund(t *testing.T, newStore Factory, l bouncer.Limit) {
	x := newModelled(t, newStore, l)
	capacity := l.Capacity()
	x.settle(3, 1)
	if d := x.check("settled below the estimate", 0); d.Remaining != capacity-1 {
		t.Errorf("settled 1 of 3: Remaining %d, want %d", d.Remaining, capacity-1)
	}
	x.advance(time.Millisecond)
	x.refund(1)
	x.settle(2, capacity+2)
	x.check("settled past the limit after a refund", 0)
	x.refund(2)
	x.check("a refund after the debt", 0)
	x.check("a refund after the debt", 1)
	x.advance(l.Period / 2)
	x.check("half a period on", 1)
}

// testSettleDenied checks that a denied reservation settles nothing.
func testSettleDenied(t *testing.T, newStore Factory) {
	h := newHarness(t, newStore)
	l := bouncer.Limit{Name: "denied", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Minute, Burst: 2}
	key := freshKey("settle-denied")
	h.check(key, 2, l)
	r := request(1, bouncer.KeyLimits{Key: key, Limits: []bouncer.Limit{l}})
	d, err := h.store.Check(context.Background(), r)
	if err != nil || d.Allowed {
		t.Fatalf("check of an empty bucket: got %+v, %v, want denied", d, err)
	}
	for _, actual := range []int64{0, 1, 5} {
		if err := bouncer.Settle(context.Background(), h.store, r, d, actual); !errors.Is(err, bouncer.ErrNotReserved) {
			t.Errorf("Settle(denied, actual %d): got %v, want ErrNotReserved", actual, err)
		}
	}
	h.at(time.Minute)
	h.wantRemaining("a minute after settling a denied check", key, l, 1)
}

// testChargeRefused checks that a charge of a limit that cannot be
// charged after the fact, or of no cost, is refused and charges nothing.
func testChargeRefused(t *testing.T, newStore Factory) {
	h := newHarness(t, newStore)
	c := h.charger()
	tb := bouncer.Limit{Name: "tb", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 5}
	inflight := bouncer.Limit{Name: "inflight", Algorithm: bouncer.Concurrency, Rate: 2, Period: time.Minute}
	shape := bouncer.Limit{Name: "shape", Algorithm: bouncer.LeakyBucket, Rate: 10, Period: time.Second, Burst: 5, Shape: true}
	key := freshKey("charge-refused")
	for _, tt := range []struct {
		name string
		r    bouncer.Request
	}{
		{"concurrency", bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{tb, inflight}}}, Cost: 1}},
		{"shaping leaky bucket", bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{shape, tb}}}, Cost: 1}},
		{"another key's concurrency", bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{tb}}, {Key: key + "-other", Limits: []bouncer.Limit{inflight}}}, Cost: 1}},
		{"peek", bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{tb}}}, Peek: true}},
		{"cost 0", bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{tb}}}}},
		{"no keys", bouncer.Request{Cost: 1}},
		{"invalid limit", bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{{Name: "bad", Algorithm: bouncer.TokenBucket, Rate: 0, Period: time.Second, Burst: 1}}}}, Cost: 1}},
	} {
		err := c.Charge(context.Background(), tt.r)
		if !errors.Is(err, bouncer.ErrInvalidRequest) && !errors.Is(err, bouncer.ErrInvalidLimit) {
			t.Errorf("Charge of %s: got %v, want an error wrapping ErrInvalidRequest or ErrInvalidLimit", tt.name, err)
		}
	}
	h.wantRemaining("after the refused charges", key, tb, 5)
	h.wantRemaining("after the refused charges", key, inflight, 2)
}

// testChargeKeys charges every limit of every key of one request, the
// same key and limit twice included.
func testChargeKeys(t *testing.T, newStore Factory) {
	h := newHarness(t, newStore)
	c := h.charger()
	perSec := bouncer.Limit{Name: "per_second", Algorithm: bouncer.GCRA, Rate: 10, Period: time.Second, Burst: 10}
	perMin := bouncer.Limit{Name: "per_minute", Algorithm: bouncer.FixedWindow, Rate: 100, Period: time.Minute}
	user, ip := freshKey("charge-user"), freshKey("charge-ip")
	r := bouncer.Request{Keys: []bouncer.KeyLimits{
		{Key: user, Limits: []bouncer.Limit{perSec, perMin}},
		{Key: ip, Limits: []bouncer.Limit{perSec}},
		{Key: user, Limits: []bouncer.Limit{perMin}},
	}, Cost: 15}
	if err := c.Charge(context.Background(), r); err != nil {
		t.Fatalf("Charge: %v", err)
	}
	for _, k := range []string{user, ip} {
		d := h.check(k, 1, perSec)
		// 15 taken from 10: 5 of debt, and one more needs 6 intervals.
		want := Want{ResetAfter: 1500 * time.Millisecond, RetryAfter: 600 * time.Millisecond}
		expect(t, "per second after charging 15 to "+k, d, want, k, perSec)
	}
	h.wantRemaining("per minute, charged twice", user, perMin, 70)
}
