package memstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
)

var perSecond = bouncer.Limit{Name: "s", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 10}

func TestSweepForgetsOnlyFreshState(t *testing.T) {
	clock := &fakeClock{t: start}
	s := memstore.New(memstore.Options{Now: clock.Now, Shards: 4})
	window := bouncer.Limit{Name: "w", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute}
	for i := range 100 {
		check(t, s, "k"+strconv.Itoa(i), 1, perSecond, window)
	}
	if got := s.Len(); got != 200 {
		t.Fatalf("Len = %d, want 200", got)
	}
	// One token refills in 100ms: the buckets are fresh, the windows not.
	clock.t = clock.t.Add(100 * time.Millisecond)
	if got := s.Sweep(); got != 100 {
		t.Fatalf("Sweep = %d, want 100 (the token buckets)", got)
	}
	if got := s.Len(); got != 100 {
		t.Fatalf("Len after sweep = %d, want 100", got)
	}
	clock.t = start.Add(time.Minute)
	if got := s.Sweep(); got != 100 {
		t.Fatalf("Sweep at the next window = %d, want 100", got)
	}
	if st := s.Stats(); st.Keys != 0 || st.Expired != 200 || st.Forced != 0 {
		t.Fatalf("Stats = %+v, want 0 keys, 200 expired, 0 forced", st)
	}
}

// A state back to fresh stays in place for a while, so that a key checked
// again finds it; once it has been fresh for a minute, insertions reclaim
// it without a Sweep.
func TestInsertsReclaimIdleState(t *testing.T) {
	clock := &fakeClock{t: start}
	s := memstore.New(memstore.Options{Now: clock.Now, Shards: 1})
	for i := range 1000 {
		check(t, s, "old"+strconv.Itoa(i), 1, perSecond)
	}
	clock.t = clock.t.Add(time.Second) // every old state is back to fresh
	for i := range 1000 {
		check(t, s, "new"+strconv.Itoa(i), 1, perSecond)
	}
	if st := s.Stats(); st.Keys != 2000 || st.Expired != 0 {
		t.Fatalf("a second after the old states refilled, Stats = %+v, want 2000 keys, none forgotten", st)
	}
	for i := range 1000 {
		if d := check(t, s, "old"+strconv.Itoa(i), 1, perSecond); !d.Allowed || d.Remaining != 9 {
			t.Fatalf("refilled key %d: %+v, want allowed with 9 remaining", i, d)
		}
	}
	clock.t = clock.t.Add(2 * time.Minute) // every state has been fresh for over a minute
	for i := range 1000 {
		check(t, s, "later"+strconv.Itoa(i), 1, perSecond)
	}
	// Each insertion inspects a few entries, so most of the 2000 idle ones
	// are gone without a Sweep.
	if got := s.Len(); got >= 2000 {
		t.Fatalf("Len = %d, want < 2000: inserts must reclaim idle state", got)
	}
	if got := s.Stats().Expired; got < 1000 {
		t.Fatalf("Expired = %d, want ≥ 1000", got)
	}
}

func TestMaxKeysBoundsTheStore(t *testing.T) {
	clock := &fakeClock{t: start}
	s := memstore.New(memstore.Options{Now: clock.Now, Shards: 1, MaxKeys: 100})
	for i := range 1000 {
		d := check(t, s, "flood"+strconv.Itoa(i), 1, perSecond)
		if !d.Allowed {
			t.Fatalf("new key %d denied: the bound must evict, not deny", i)
		}
	}
	st := s.Stats()
	if st.Keys != 100 {
		t.Errorf("Keys = %d, want 100 (MaxKeys)", st.Keys)
	}
	if st.Forced != 900 {
		t.Errorf("Forced = %d, want 900", st.Forced)
	}
	// Once state has expired, the bound evicts it rather than live state.
	clock.t = clock.t.Add(time.Second)
	for i := range 50 {
		check(t, s, "later"+strconv.Itoa(i), 1, perSecond)
	}
	if got := s.Stats().Forced; got != 900 {
		t.Errorf("Forced after expiry = %d, want still 900", got)
	}
}

// Checks on the same keys in opposite orders must not deadlock: shards are
// locked in a fixed order.
func TestMultiKeyChecksDoNotDeadlock(t *testing.T) {
	s := memstore.New(memstore.Options{Shards: 64})
	big := bouncer.Limit{Name: "big", Algorithm: bouncer.GCRA, Rate: 1000, Period: time.Millisecond, Burst: 1 << 20}
	keys := make([]bouncer.KeyLimits, 8)
	for i := range keys {
		keys[i] = bouncer.KeyLimits{Key: "key" + strconv.Itoa(i), Limits: []bouncer.Limit{big}}
	}
	reversed := make([]bouncer.KeyLimits, len(keys))
	for i, k := range keys {
		reversed[len(keys)-1-i] = k
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			order := keys
			if g%2 == 1 {
				order = reversed
			}
			for range 500 {
				if _, err := s.Check(context.Background(), bouncer.Request{Keys: order, Cost: 1}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	d, err := s.Check(context.Background(), bouncer.Request{Keys: keys, Peek: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Capacity != 1<<20 {
		t.Fatalf("Limit = %d, want %d", d.Capacity, 1<<20)
	}
}
