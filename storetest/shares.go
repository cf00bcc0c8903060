package storetest

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// SharerFactory returns a new, empty store.Sharer that reads time from
// clock.Now. It may register cleanups on t. Shares calls it from parallel
// subtests.
type SharerFactory func(t *testing.T, clock *Clock) store.Sharer

// Shares runs the conformance suite of store.Sharer against stores made
// by newStore, as named subtests of t: each instance learns the others'
// shares and never its own, a share recorded again replaces the last,
// shares expire after their TTL on the store's clock, pairs of one key
// under different limits are kept apart, a pair keeps at most
// store.MaxShareInstances shares, and invalid input is refused with
// bouncer.ErrInvalidRequest; a SyncShares decides its pushes as Check
// would, exchanges its shares as ExchangeShares would, and refuses
// invalid input. Each subtest's instances share one store,
// as instances share one Redis.
func Shares(t *testing.T, newStore SharerFactory) {
	t.Helper()
	t.Run("Others", func(t *testing.T) { testSharesOthers(t, newStore) })
	t.Run("Replace", func(t *testing.T) { testSharesReplace(t, newStore) })
	t.Run("Expiry", func(t *testing.T) { testSharesExpiry(t, newStore) })
	t.Run("PairsApart", func(t *testing.T) { testSharesPairsApart(t, newStore) })
	t.Run("MostInstances", func(t *testing.T) { testSharesMostInstances(t, newStore) })
	t.Run("InvalidInput", func(t *testing.T) { testSharesInvalid(t, newStore) })
	t.Run("SyncChecks", func(t *testing.T) { testSyncChecks(t, newStore) })
	t.Run("SyncInvalid", func(t *testing.T) { testSyncInvalid(t, newStore) })
}

// shareTTL is the suite's TTL: long, so that a store whose hashes also
// expire on a real clock keeps them while a subtest runs.
const shareTTL = time.Minute

// shareLimit is a limit of the suite's pairs.
var shareLimit = bouncer.Limit{Name: "shared", Algorithm: bouncer.FixedWindow, Rate: 100, Period: time.Second}

// sharePair is the pair of key under l.
func sharePair(key string, l bouncer.Limit) bouncer.Request {
	return bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: 1}
}

// share is a share of inst whose fields but Instance are all set from n,
// each to a value of its own, so that a store that drops a field, or
// mixes two up, fails the suite; a float with a fraction a decimal form
// must carry exactly, an int64 beyond a double's 2⁵³.
func share(inst string, n int64) store.Share {
	sh := store.Share{Instance: inst}
	v := reflect.ValueOf(&sh).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case v.Type().Field(i).Name == "Instance":
		case f.Kind() == reflect.String:
			f.SetString(fmt.Sprintf("field %d of %d", i, n))
		case f.Kind() == reflect.Int64:
			f.SetInt(n<<40 + int64(i)<<54 + 7)
		case f.Kind() == reflect.Float64:
			f.SetFloat(float64(n) + float64(i)/3)
		default:
			panic(fmt.Sprintf("storetest: store.Share.%s is a %s, which share cannot fill yet", v.Type().Field(i).Name, f.Kind()))
		}
	}
	return sh
}

// shareHarness is one store.Sharer on its own clock.
type shareHarness struct {
	t     testing.TB
	store store.Sharer
	clock *Clock
}

func newShareHarness(t *testing.T, newStore SharerFactory) *shareHarness {
	t.Helper()
	clock := NewClock(Start)
	return &shareHarness{t: t, store: newStore(t, clock), clock: clock}
}

// exchange records mine for pairs, failing the test on an error, and
// returns the others' shares of each pair, sorted by instance.
func (h *shareHarness) exchange(pairs []bouncer.Request, mine ...store.Share) [][]store.Share {
	h.t.Helper()
	others, err := h.store.ExchangeShares(h.t.Context(), shareTTL, pairs, mine)
	if err != nil {
		h.t.Fatalf("ExchangeShares(%d pairs, %d shares): %v", len(pairs), len(mine), err)
	}
	if len(others) != len(pairs) {
		h.t.Fatalf("ExchangeShares(%d pairs): got %d lists of others, want one per pair", len(pairs), len(others))
	}
	for _, o := range others {
		slices.SortFunc(o, func(a, b store.Share) int { return cmp.Compare(a.Instance, b.Instance) })
	}
	return others
}

// one exchanges s alone for pair p and returns the others' shares.
func (h *shareHarness) one(p bouncer.Request, s store.Share) []store.Share {
	h.t.Helper()
	return h.exchange([]bouncer.Request{p}, s)[0]
}

// wantShares fails unless got holds want, in order.
func wantShares(t testing.TB, what string, got []store.Share, want ...store.Share) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %+v, want %+v", what, got, want)
	}
}

func testSharesOthers(t *testing.T, newStore SharerFactory) {
	h := newShareHarness(t, newStore)
	p, q := sharePair(freshKey("shares"), shareLimit), sharePair(freshKey("shares"), shareLimit)
	wantShares(t, "a first", h.one(p, share("a", 1)))
	wantShares(t, "a again, alone", h.one(p, share("a", 1)))
	wantShares(t, "b after a", h.one(p, share("b", 2)), share("a", 1))
	got := h.exchange([]bouncer.Request{p, q}, share("c", 3), share("c", 4))
	wantShares(t, "c after a and b", got[0], share("a", 1), share("b", 2))
	wantShares(t, "c's second pair, new", got[1])
	got = h.exchange([]bouncer.Request{q, p}, share("a", 5), share("a", 1))
	wantShares(t, "a's second pair, after c", got[0], share("c", 4))
	wantShares(t, "a's first pair, after b and c", got[1], share("b", 2), share("c", 3))
	if others, err := h.store.ExchangeShares(t.Context(), shareTTL, nil, nil); err != nil || len(others) != 0 {
		t.Errorf("no pairs: got %+v, %v, want none and no error", others, err)
	}
}

func testSharesReplace(t *testing.T, newStore SharerFactory) {
	h := newShareHarness(t, newStore)
	p := sharePair(freshKey("shares"), shareLimit)
	h.one(p, share("a", 1))
	h.clock.Advance(time.Second)
	h.one(p, share("a", 2))
	wantShares(t, "b after a recorded twice", h.one(p, share("b", 9)), share("a", 2))
	// The same pair twice in one exchange: the second records after the
	// first, as two exchanges in turn would.
	got := h.exchange([]bouncer.Request{p, p}, share("c", 3), share("c", 4))
	wantShares(t, "c's first of two", got[0], share("a", 2), share("b", 9))
	wantShares(t, "c's second of two", got[1], share("a", 2), share("b", 9))
	wantShares(t, "a after c recorded twice", h.one(p, share("a", 2)), share("b", 9), share("c", 4))
}

func testSharesExpiry(t *testing.T, newStore SharerFactory) {
	h := newShareHarness(t, newStore)
	p := sharePair(freshKey("shares"), shareLimit)
	h.one(p, share("a", 1))
	h.clock.Advance(shareTTL / 2)
	h.one(p, share("b", 2))
	h.clock.Advance(shareTTL/2 - time.Millisecond)
	wantShares(t, "1ms before a's TTL", h.one(p, share("c", 3)), share("a", 1), share("b", 2))
	h.clock.Advance(time.Millisecond)
	wantShares(t, "at a's TTL", h.one(p, share("c", 3)), share("b", 2))
	h.one(p, share("b", 4)) // recorded again: its TTL starts anew
	h.clock.Advance(shareTTL - time.Millisecond)
	wantShares(t, "1ms before b's second TTL", h.one(p, share("d", 5)), share("b", 4), share("c", 3))
	h.clock.Advance(time.Millisecond)
	wantShares(t, "after every TTL but d's", h.one(p, share("e", 6)), share("d", 5))
	h.clock.Advance(shareTTL)
	wantShares(t, "after every TTL", h.one(p, share("a", 1)))
}

func testSharesPairsApart(t *testing.T, newStore SharerFactory) {
	h := newShareHarness(t, newStore)
	key := freshKey("shares")
	other := shareLimit
	other.Rate = 200
	renamed := shareLimit
	renamed.Name = "renamed"
	gcra := bouncer.Limit{Name: shareLimit.Name, Algorithm: bouncer.GCRA, Rate: 100, Period: time.Second, Burst: 10}
	h.one(sharePair(key, shareLimit), share("a", 1))
	for _, l := range []bouncer.Limit{other, renamed, gcra} {
		wantShares(t, "key under "+l.String(), h.one(sharePair(key, l), share("b", 2)))
	}
	wantShares(t, "another key", h.one(sharePair(freshKey("shares"), shareLimit), share("b", 2)))
	wantShares(t, "the first pair", h.one(sharePair(key, shareLimit), share("b", 2)), share("a", 1))
	wantShares(t, "the second pair", h.one(sharePair(key, other), share("a", 3)), share("b", 2))
}

// testSharesMostInstances records a share for one more instance than a
// pair keeps, each a millisecond after the last: the first, which
// expires first, is dropped. A share of no TTL at the bound drops none.
func testSharesMostInstances(t *testing.T, newStore SharerFactory) {
	h := newShareHarness(t, newStore)
	p := sharePair(freshKey("shares"), shareLimit)
	name := func(i int) string { return fmt.Sprintf("i%04d", i) }
	for i := range store.MaxShareInstances {
		h.one(p, share(name(i), 1))
		h.clock.Advance(time.Millisecond)
	}
	// A share of no TTL records nothing, and so drops nothing.
	none, err := h.store.ExchangeShares(t.Context(), 0, []bouncer.Request{p}, []store.Share{share("z", 1)})
	if err != nil || len(none) != 1 || len(none[0]) != store.MaxShareInstances {
		t.Fatalf("a share of no TTL at the bound: got %d others, %v; want %d", len(none[0]), err, store.MaxShareInstances)
	}
	got := h.one(p, share(name(store.MaxShareInstances), 1))
	if len(got) != store.MaxShareInstances-1 || got[0].Instance != name(1) {
		first := ""
		if len(got) > 0 {
			first = got[0].Instance
		}
		t.Fatalf("after %d instances: got %d others from %q, want %d from %q",
			store.MaxShareInstances+1, len(got), first, store.MaxShareInstances-1, name(1))
	}
	got = h.one(p, share(name(0), 1))
	if len(got) != store.MaxShareInstances-1 || got[0].Instance != name(2) {
		t.Fatalf("the first instance back: got %d others, want %d from %q", len(got), store.MaxShareInstances-1, name(2))
	}
}

func testSharesInvalid(t *testing.T, newStore SharerFactory) {
	h := newShareHarness(t, newStore)
	p := sharePair(freshKey("shares"), shareLimit)
	two := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "a", Limits: []bouncer.Limit{shareLimit}}, {Key: "b", Limits: []bouncer.Limit{shareLimit}}}, Cost: 1}
	twoLimits := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "a", Limits: []bouncer.Limit{shareLimit, {Name: "x", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Second, Burst: 1}}}}, Cost: 1}
	for _, tc := range []struct {
		name  string
		pairs []bouncer.Request
		mine  []store.Share
	}{
		{"more pairs than shares", []bouncer.Request{p, p}, []store.Share{share("a", 1)}},
		{"more shares than pairs", []bouncer.Request{p}, []store.Share{share("a", 1), share("a", 2)}},
		{"two keys", []bouncer.Request{two}, []store.Share{share("a", 1)}},
		{"two limits", []bouncer.Request{twoLimits}, []store.Share{share("a", 1)}},
		{"no instance", []bouncer.Request{p}, []store.Share{share("", 1)}},
		{"instance name too long", []bouncer.Request{p}, []store.Share{share(strings.Repeat("i", store.MaxInstanceName+1), 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			others, err := h.store.ExchangeShares(t.Context(), shareTTL, tc.pairs, tc.mine)
			errorsIs(t, "ExchangeShares", err, bouncer.ErrInvalidRequest)
			if others != nil {
				t.Errorf("ExchangeShares: got others %+v with the error, want none", others)
			}
		})
	}
	// Nothing invalid was recorded.
	wantShares(t, "after the invalid exchanges", h.one(p, share("b", 1)))
}
