// Package edgetest holds what the tests of the HTTP middleware and the
// gRPC interceptors share: a memory store on a clock they move, and
// limiters that fail or degrade.
package edgetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
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
