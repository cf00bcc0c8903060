// Package edgetest holds what the tests of the HTTP middleware and the
// gRPC interceptors share: a memory store on a clock they move, and
// limiters that fail or degrade.
package edgetest

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

// NewStore returns a memory store on a storetest.Clock at noon,
// 2026-12-01 UTC, closed when t ends.
func NewStore(t *testing.T) (*memstore.Store, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { s.Close() })
	return s, clock
}

// PerMinute is a fixed window of n a minute named name.
func PerMinute(name string, n int64) bouncer.Limit {
	return bouncer.Limit{Name: name, Algorithm: bouncer.FixedWindow, Rate: n, Period: time.Minute}
}

// Failing is a limiter whose store is down: every check fails.
type Failing struct{ bouncer.Limiter }

// Check fails.
func (Failing) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{}, errors.New("store down")
}

// Degraded is a limiter whose decisions are marked made without the
// store.
type Degraded struct{ bouncer.Limiter }

// Check decides with the limiter it wraps and marks the decision degraded.
func (d Degraded) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	dec, err := d.Limiter.Check(ctx, r)
	dec.Degraded = true
	return dec, err
}

// Ledger is a store.Charger that counts the units charged to each key
// and limit, without time: a limit admits Rate units in all. It stands
// for a store in the edges' settle tests, whose end-to-end twins run on
// the memory store.
type Ledger struct {
	mu   sync.Mutex
	used map[string]int64
}

// Used returns the units charged to key's limit.
func (l *Ledger) Used(key, limit string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used[key+"\x00"+limit]
}

// Check charges r.Cost to every limit of r if each has room for it.
func (l *Ledger) Check(_ context.Context, r bouncer.Request) (bouncer.Decision, error) {
	if err := store.Validate(r); err != nil {
		return bouncer.Decision{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := bouncer.Decision{Allowed: true}
	least := int64(math.MaxInt64)
	for _, k := range r.Keys {
		for _, lim := range k.Limits {
			if left := lim.Rate - l.used[k.Key+"\x00"+lim.Name]; left < least {
				least, d.Capacity, d.Key, d.LimitName = left, lim.Rate, k.Key, lim.Name
			}
		}
	}
	if least < r.Cost {
		d.Allowed, d.Remaining, d.RetryAfter = false, max(least, 0), time.Minute
		return d, nil
	}
	d.Remaining = least - r.Cost
	l.add(r, r.Cost)
	return d, nil
}

// Refund gives r.Cost back, never below 0.
func (l *Ledger) Refund(_ context.Context, r bouncer.Request) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(r, -r.Cost)
	return nil
}

// Charge charges r.Cost whatever the limits hold.
func (l *Ledger) Charge(_ context.Context, r bouncer.Request) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(r, r.Cost)
	return nil
}

func (l *Ledger) add(r bouncer.Request, n int64) {
	if l.used == nil {
		l.used = map[string]int64{}
	}
	for _, k := range r.Keys {
		for _, lim := range k.Limits {
			id := k.Key + "\x00" + lim.Name
			l.used[id] = max(l.used[id]+n, 0)
		}
	}
}

// Sum returns the units charged to every key's limit named limit.
func (l *Ledger) Sum(limit string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for id, u := range l.used {
		if strings.HasSuffix(id, "\x00"+limit) {
			n += u
		}
	}
	return n
}
