package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

var start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func check(t *testing.T, s *memstore.Store, key string, cost int64, limits ...bouncer.Limit) bouncer.Decision {
	t.Helper()
	d, err := s.Check(context.Background(), bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: limits}}, Cost: cost})
	if err != nil {
		t.Fatalf("Check(%q): %v", key, err)
	}
	return d
}

func TestEvictsIdleKeys(t *testing.T) {
	clock := &fakeClock{t: start}
	s := memstore.New(memstore.Options{Now: clock.Now, Shards: 1})
	l := bouncer.Limit{Name: "s", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 10}
	for i := range 100 {
		check(t, s, "k"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1, l)
	}
	if got := s.Len(); got != 100 {
		t.Fatalf("Len = %d, want 100", got)
	}
	clock.t = clock.t.Add(time.Second)
	if got := s.Sweep(); got != 100 {
		t.Fatalf("Sweep = %d, want 100", got)
	}
	if got := s.Len(); got != 0 {
		t.Fatalf("Len after sweep = %d, want 0", got)
	}
}
