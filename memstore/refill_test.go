package memstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"pgregory.net/rapid"
)

// A key whose state is back to fresh decides exactly as a key the store
// has never seen: after a few checks of one key, the clock moves past the
// time its state takes to refill, and from then on that key and a new one
// go through the same checks at the same instants. The first key's state
// is still held (a table keeps refilled state until it needs room), so
// its checks take the path of a key with state, and the new key's first
// check takes the path of an insertion.
func TestRefilledStateDecidesAsAFreshKey(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := drawLimit(t)
		clock := &fakeClock{t: start.Add(time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "start")))}
		s := memstore.New(memstore.Options{Now: clock.Now, Shards: rapid.SampledFrom([]int{1, 4}).Draw(t, "shards")})
		for i := range rapid.IntRange(1, 5).Draw(t, "charges") {
			clock.t = clock.t.Add(time.Duration(rapid.Int64Range(0, int64(l.Period)).Draw(t, "dt"+strconv.Itoa(i))))
			rcheck(t, s, "old", rapid.Int64Range(0, l.Capacity()).Draw(t, "cost"+strconv.Itoa(i)), l)
		}
		// Longer than any state of these limits takes to be fresh again.
		clock.t = clock.t.Add(3 * l.Period * time.Duration(max(l.Burst, 1)))
		for i := range rapid.IntRange(1, 8).Draw(t, "steps") {
			clock.t = clock.t.Add(time.Duration(rapid.Int64Range(0, int64(l.Period)).Draw(t, "step"+strconv.Itoa(i))))
			cost := rapid.Int64Range(0, l.Capacity()+1).Draw(t, "stepcost"+strconv.Itoa(i))
			old := rcheck(t, s, "old", cost, l)
			fresh := rcheck(t, s, "fresh", cost, l)
			old.Key, fresh.Key = "", ""
			if old != fresh {
				t.Fatalf("step %d, cost %d: the refilled key got %+v, the new key %+v", i, cost, old, fresh)
			}
		}
	})
}

// drawLimit draws a valid limit of any algorithm, with small numbers so
// that checks are denied as well as allowed.
func drawLimit(t *rapid.T) bouncer.Limit {
	for {
		a := rapid.SampledFrom(bouncer.Algorithms()).Draw(t, "algorithm")
		l := bouncer.Limit{
			Name:      "l",
			Algorithm: a,
			Rate:      rapid.Int64Range(1, 5).Draw(t, "rate"),
			Period:    rapid.SampledFrom([]time.Duration{time.Millisecond, 10 * time.Millisecond, time.Second}).Draw(t, "period"),
		}
		if a.UsesBurst() {
			l.Burst = rapid.Int64Range(1, 5).Draw(t, "burst")
		}
		if a == bouncer.LeakyBucket {
			l.Shape = rapid.Bool().Draw(t, "shape")
		}
		if a == bouncer.FixedWindow || a == bouncer.SlidingWindowCounter {
			l.ChargeDenied = rapid.Bool().Draw(t, "chargeDenied")
		}
		if l.Validate() == nil {
			return l
		}
	}
}

// rcheck is check for a property test.
func rcheck(t *rapid.T, s *memstore.Store, key string, cost int64, l bouncer.Limit) bouncer.Decision {
	t.Helper()
	d, err := s.Check(context.Background(), bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: cost, Peek: cost == 0})
	if err != nil {
		t.Fatalf("Check(%q, %d): %v", key, cost, err)
	}
	return d
}

// States kept in place after they refill still count against MaxKeys:
// checking them again adds nothing, and new keys take their room.
func TestRefilledStateKeepsTheBound(t *testing.T) {
	clock := &fakeClock{t: start}
	s := memstore.New(memstore.Options{Now: clock.Now, Shards: 1, MaxKeys: 64})
	for i := range 64 {
		check(t, s, "old"+strconv.Itoa(i), 1, perSecond)
	}
	clock.t = clock.t.Add(time.Second)
	for i := range 64 {
		if d := check(t, s, "old"+strconv.Itoa(i), 1, perSecond); !d.Allowed || d.Remaining != 9 {
			t.Fatalf("refilled key %d: %+v, want allowed with 9 remaining", i, d)
		}
	}
	if st := s.Stats(); st.Keys != 64 || st.Expired != 0 || st.Forced != 0 {
		t.Fatalf("after checks of refilled keys, Stats = %+v, want 64 keys, none forgotten", st)
	}
	clock.t = clock.t.Add(time.Second) // refilled again, and still held
	check(t, s, "new0", 1, perSecond)
	// Every state the first insertion samples is back to fresh: it makes
	// room by forgetting some of them, and forces out nothing live.
	if st := s.Stats(); st.Expired == 0 || st.Forced != 0 || st.Keys != 65-int(st.Expired) {
		t.Fatalf("after the first new key, Stats = %+v, want refilled states forgotten and none forced", st)
	}
	for i := 1; i < 64; i++ {
		check(t, s, "new"+strconv.Itoa(i), 1, perSecond)
		if got := s.Len(); got > 64 {
			t.Fatalf("after new key %d, Len = %d, want at most MaxKeys (64)", i, got)
		}
	}
	// Eviction samples: a full shard whose sample holds no fresh state
	// evicts a live one, so the split between the two counts varies, and
	// their sum does not.
	if st := s.Stats(); st.Keys != s.Len() || st.Keys+int(st.Expired+st.Forced) != 128 {
		t.Fatalf("Stats = %+v with Len %d, want every one of the 128 states held or counted as forgotten", st, s.Len())
	}
}
