package storetest

import (
	"context"
	"testing"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// testReset checks a store's Reset, if it has one (store.Resetter):
// under every limit of the scenarios, a key charged until denied, once
// reset, decides as a key never checked does — a window's count, a
// sliding counter's previous window and a log's entries all gone, not
// merely refunded — while another key keeps its state; one reset covers
// every limit of every key it names.
func testReset(t *testing.T, newStore Factory) {
	h := newHarness(t, newStore)
	rs, ok := h.store.(store.Resetter)
	if !ok {
		t.Skipf("%T is not a store.Resetter", h.store)
	}
	reset := func(keys ...bouncer.KeyLimits) {
		t.Helper()
		if err := rs.Reset(context.Background(), bouncer.Request{Keys: keys}); err != nil {
			t.Fatalf("Reset(%s): %v", describe(keys), err)
		}
	}
	for _, sc := range Scenarios() {
		l := sc.Limit
		key, other, fresh := freshKey("reset"), freshKey("reset-other"), freshKey("reset-fresh")
		for range min(l.Capacity()+2, 64) {
			h.check(key, 1, l)
		}
		h.check(other, 1, l)
		before := WantOf(h.peek(other, l))
		reset(bouncer.KeyLimits{Key: key, Limits: []bouncer.Limit{l}})
		if got, want := WantOf(h.peek(key, l)), WantOf(h.peek(fresh, l)); got != want {
			t.Errorf("%s: a peek after a reset: got %v, want a fresh key's %v", sc.Name, got, want)
		}
		if got, want := WantOf(h.check(key, 1, l)), WantOf(h.check(fresh, 1, l)); got != want {
			t.Errorf("%s: a check after a reset: got %v, want a fresh key's %v", sc.Name, got, want)
		}
		if got := WantOf(h.peek(other, l)); got != before {
			t.Errorf("%s: another key after the reset: got %v, want its state kept, %v", sc.Name, got, before)
		}
	}

	// One reset of two keys, one of them under two limits, clears all three.
	a, b := freshKey("reset-a"), freshKey("reset-b")
	h.check(a, 3, perSecond, perMinute)
	h.check(b, 1, perMinute)
	reset(bouncer.KeyLimits{Key: a, Limits: []bouncer.Limit{perSecond, perMinute}}, bouncer.KeyLimits{Key: b, Limits: []bouncer.Limit{perMinute}})
	h.wantRemaining("a, per second, after the reset", a, perSecond, perSecond.Capacity())
	h.wantRemaining("a, per minute, after the reset", a, perMinute, perMinute.Capacity())
	h.wantRemaining("b, per minute, after the reset", b, perMinute, perMinute.Capacity())

	// A key never checked resets to what it was; a request without keys
	// is invalid.
	reset(bouncer.KeyLimits{Key: freshKey("reset-never"), Limits: []bouncer.Limit{perSecond}})
	errorsIs(t, "Reset without keys", rs.Reset(context.Background(), bouncer.Request{}), bouncer.ErrInvalidRequest)
}
