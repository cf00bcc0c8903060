package storetest

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// sync makes one SyncShares of pushes and shares with the suite's TTL,
// failing the test on an error, and returns the decisions and the others'
// shares of each share's pair, sorted by instance.
func (h *shareHarness) sync(pushes []bouncer.Request, shares ...store.SyncShare) ([]bouncer.Decision, [][]store.Share) {
	h.t.Helper()
	ds := make([]bouncer.Decision, len(pushes))
	others, err := h.store.SyncShares(h.t.Context(), shareTTL, pushes, ds, shares)
	if err != nil {
		h.t.Fatalf("SyncShares(%d pushes, %d shares): %v", len(pushes), len(shares), err)
	}
	if len(others) != len(shares) {
		h.t.Fatalf("SyncShares(%d shares): got %d lists of others, want one per share", len(shares), len(others))
	}
	for _, o := range others {
		slices.SortFunc(o, func(a, b store.Share) int { return cmp.Compare(a.Instance, b.Instance) })
	}
	return ds, others
}

// push is a push of cost units (a peek for 0) of key under shareLimit.
func push(key string, cost int64) bouncer.Request {
	r := sharePair(key, shareLimit)
	r.Cost, r.Peek = cost, cost == 0
	return r
}

// testSyncChecks makes syncs whose pushes, of two keys, must be decided
// exactly as Check decides the same requests of two twin keys at the
// same instants, one after another within a sync; the shares the syncs
// record are exchanged as ExchangeShares's are, the last of a pair
// pushed twice in one sync replacing the first.
func testSyncChecks(t *testing.T, newStore SharerFactory) {
	h := newShareHarness(t, newStore)
	keys := []string{freshKey("sync"), freshKey("sync")}
	twins := []string{freshKey("twin"), freshKey("twin")}
	type push1 struct {
		key  int
		cost int64
	}
	rounds := [][]push1{
		{{0, 30}, {1, 0}},
		{{0, 60}, {0, 20}, {1, 99}}, // the second of key 0 denied: 10 left
		{{0, 10}, {0, 1}, {1, 1}},   // key 0: none left, then denied; key 1: its last unit
		{{1, 0}, {0, 0}},            // peeks of spent windows
		{{0, 101}},                  // more than the limit: denied
	}
	for n, round := range rounds {
		var pushes []bouncer.Request
		var shares []store.SyncShare
		var want []bouncer.Decision
		for k, c := range round {
			d, err := h.store.Check(t.Context(), push(twins[c.key], c.cost))
			if err != nil {
				t.Fatalf("round %d: the twin's check %d: %v", n, k, err)
			}
			d.Key = keys[c.key]
			want = append(want, d)
			pushes = append(pushes, push(keys[c.key], c.cost))
			shares = append(shares, store.SyncShare{Pair: k, Share: share("a", int64(10*n+k))})
		}
		got, _ := h.sync(pushes, shares...)
		for k := range round {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("round %d, push %d: got %+v, want %+v (Check's)", n, k, got[k], want[k])
			}
		}
		h.clock.Advance(10 * time.Millisecond)
	}
	// b's sync sees a's last share of each key: of the last round, and
	// for key 1 of round 3's first push.
	_, others := h.sync([]bouncer.Request{push(keys[0], 0), push(keys[1], 0)},
		store.SyncShare{Pair: 0, Share: share("b", 1)}, store.SyncShare{Pair: 1, Share: share("b", 2)})
	wantShares(t, "b's sync of key 0", others[0], share("a", 40))
	wantShares(t, "b's sync of key 1", others[1], share("a", 30))
	// A sync of pushes and no shares decides them, and records nothing.
	if ds, others := h.sync([]bouncer.Request{push(keys[1], 0)}); len(others) != 0 || ds[0].Remaining != 0 {
		t.Errorf("a sync without shares: got %+v and %d lists of others, want 0 remaining and none", ds, len(others))
	}
}

func testSyncInvalid(t *testing.T, newStore SharerFactory) {
	h := newShareHarness(t, newStore)
	key := freshKey("sync")
	p := push(key, 1)
	two := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "a", Limits: []bouncer.Limit{shareLimit}}, {Key: "b", Limits: []bouncer.Limit{shareLimit}}}, Cost: 1}
	noCost := sharePair(key, shareLimit)
	noCost.Cost = 0
	for _, tc := range []struct {
		name   string
		pushes []bouncer.Request
		ds     int
		shares []store.SyncShare
	}{
		{"fewer decisions than pushes", []bouncer.Request{p, p}, 1, nil},
		{"a share of no push", []bouncer.Request{p}, 1, []store.SyncShare{{Pair: 1, Share: share("a", 1)}}},
		{"a share of a negative push", []bouncer.Request{p}, 1, []store.SyncShare{{Pair: -1, Share: share("a", 1)}}},
		{"a push of two keys", []bouncer.Request{p, two}, 2, nil},
		{"an invalid push", []bouncer.Request{p, noCost}, 2, nil},
		{"no instance", []bouncer.Request{p}, 1, []store.SyncShare{{Pair: 0, Share: share("", 1)}}},
		{"instance name too long", []bouncer.Request{p}, 1, []store.SyncShare{{Pair: 0, Share: share(strings.Repeat("i", store.MaxInstanceName+1), 1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			others, err := h.store.SyncShares(t.Context(), shareTTL, tc.pushes, make([]bouncer.Decision, tc.ds), tc.shares)
			errorsIs(t, "SyncShares", err, bouncer.ErrInvalidRequest)
			if others != nil {
				t.Errorf("SyncShares: got others %+v with the error, want none", others)
			}
		})
	}
	// Nothing was pushed, nor recorded.
	ds, others := h.sync([]bouncer.Request{push(key, 0)}, store.SyncShare{Pair: 0, Share: share("b", 1)})
	if ds[0].Remaining != shareLimit.Rate || len(others[0]) != 0 {
		t.Errorf("after the invalid syncs: got %d remaining and others %+v, want %d and none", ds[0].Remaining, others[0], shareLimit.Rate)
	}
}
