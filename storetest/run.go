package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
)

// Factory returns a new, empty store that reads time from clock.Now. It
// may register cleanups on t. Run calls it from parallel subtests.
type Factory func(t *testing.T, clock *Clock) bouncer.Limiter

// Run runs the whole conformance suite against stores made by newStore,
// as named subtests of t. Each subtest makes its own store and clock, so
// subtests can be selected with -run. The suite takes a few seconds.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	t.Run("Scenarios", func(t *testing.T) { testScenarios(t, newStore) })
	t.Run("AllOrNothing", func(t *testing.T) { testAllOrNothing(t, newStore) })
	t.Run("ChargeDenied", func(t *testing.T) { testChargeDenied(t, newStore) })
	t.Run("Binding", func(t *testing.T) { testBinding(t, newStore) })
	t.Run("Peek", func(t *testing.T) { testPeek(t, newStore) })
	t.Run("CostAboveCapacity", func(t *testing.T) { testCostAboveCapacity(t, newStore) })
	t.Run("RefundCapped", func(t *testing.T) { testRefundCapped(t, newStore) })
	t.Run("KeyIsolation", func(t *testing.T) { testKeyIsolation(t, newStore) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, newStore) })
	t.Run("InvalidInput", func(t *testing.T) { testInvalidInput(t, newStore) })
	t.Run("Reset", func(t *testing.T) { testReset(t, newStore) })
	t.Run("Settle", func(t *testing.T) { testSettle(t, newStore) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newStore) })
	t.Run("Property", func(t *testing.T) { testProperty(t, newStore) })
}

// harness is one store on its own clock, with checks that fail the test
// on a store error.
type harness struct {
	t     testing.TB
	store bouncer.Limiter
	clock *Clock
}

func newHarness(t *testing.T, newStore Factory) *harness {
	t.Helper()
	clock := NewClock(Start)
	return &harness{t: t, store: newStore(t, clock), clock: clock}
}

// at sets the clock to offset d from Start.
func (h *harness) at(d time.Duration) { h.clock.Set(Start.Add(d)) }

// check runs a check of cost on one key under limits.
func (h *harness) check(key string, cost int64, limits ...bouncer.Limit) bouncer.Decision {
	h.t.Helper()
	return h.checkKeys(cost, bouncer.KeyLimits{Key: key, Limits: limits})
}

func (h *harness) checkKeys(cost int64, keys ...bouncer.KeyLimits) bouncer.Decision {
	h.t.Helper()
	d, err := h.store.Check(context.Background(), request(cost, keys...))
	if err != nil {
		h.t.Fatalf("Check(cost %d, %s): %v", cost, describe(keys), err)
	}
	return d
}

// request is a request of cost for keys: a peek when cost is 0.
func request(cost int64, keys ...bouncer.KeyLimits) bouncer.Request {
	return bouncer.Request{Keys: keys, Cost: cost, Peek: cost == 0}
}

// peek returns the state of one limit of key without charging it.
func (h *harness) peek(key string, l bouncer.Limit) bouncer.Decision {
	h.t.Helper()
	return h.check(key, 0, l)
}

func (h *harness) refund(key string, n int64, limits ...bouncer.Limit) {
	h.t.Helper()
	r := request(n, bouncer.KeyLimits{Key: key, Limits: limits})
	if err := h.store.Refund(context.Background(), r); err != nil {
		h.t.Fatalf("Refund(%d, %q): %v", n, key, err)
	}
}

// wantRemaining fails unless a peek at key's limit l shows remaining.
func (h *harness) wantRemaining(what, key string, l bouncer.Limit, remaining int64) {
	h.t.Helper()
	if got := h.peek(key, l).Remaining; got != remaining {
		h.t.Errorf("%s: peek %q %q: Remaining: got %d, want %d", what, key, l.Name, got, remaining)
	}
}

// expect fails unless d decides as want for the single limit l of key.
func expect(t testing.TB, what string, d bouncer.Decision, want Want, key string, l bouncer.Limit) {
	t.Helper()
	if got := WantOf(d); got != want {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
	if d.Capacity != l.Capacity() || d.Key != key || d.LimitName != l.Name {
		t.Errorf("%s: binding limit: got (Limit %d, Key %q, LimitName %q), want (%d, %q, %q)",
			what, d.Capacity, d.Key, d.LimitName, l.Capacity(), key, l.Name)
	}
}

// keys hands out keys that no other part of the suite uses, so that
// stores shared across iterations start every key fresh.
var keySeq atomic.Int64

func freshKey(prefix string) string { return fmt.Sprintf("%s-%d", prefix, keySeq.Add(1)) }

func describe(keys []bouncer.KeyLimits) string {
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q:", k.Key)
		for _, l := range k.Limits {
			s += " [" + l.String() + "]"
		}
	}
	return s
}

// exampleLimits returns one small limit per algorithm, plus the shaping
// leaky bucket and the window algorithms charging denied checks, each
// with capacity 5 and a name of its algorithm.
func exampleLimits() []bouncer.Limit {
	var ls []bouncer.Limit
	for _, a := range bouncer.Algorithms() {
		l := bouncer.Limit{Name: a.String(), Algorithm: a, Rate: 5, Period: time.Second}
		if a.UsesBurst() {
			l.Rate, l.Burst = 10, 5
		}
		ls = append(ls, l)
	}
	return append(ls,
		bouncer.Limit{Name: "leaky_bucket_shape", Algorithm: bouncer.LeakyBucket, Rate: 10, Period: time.Second, Burst: 5, Shape: true},
		bouncer.Limit{Name: "fixed_window_charge_denied", Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Second, ChargeDenied: true},
		bouncer.Limit{Name: "sliding_window_counter_charge_denied", Algorithm: bouncer.SlidingWindowCounter, Rate: 5, Period: time.Second, ChargeDenied: true},
	)
}

func testScenarios(t *testing.T, newStore Factory) {
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			h := newHarness(t, newStore)
			if hasCharge(sc) {
				h.charger() // skips the scenario unless the store can charge
			}
			key := freshKey("scenario")
			for i, st := range sc.Steps {
				h.at(st.At)
				switch {
				case st.Refund:
					h.refund(key, st.Cost, sc.Limit)
					continue
				case st.Charge:
					h.charge(key, st.Cost, sc.Limit)
					continue
				}
				d := h.check(key, st.Cost, sc.Limit)
				expect(t, fmt.Sprintf("step %d (at %v, cost %d)", i, st.At, st.Cost), d, st.Want, key, sc.Limit)
			}
		})
	}
}

// errorsIs fails unless err wraps target.
func errorsIs(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}
