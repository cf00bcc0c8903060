package redisstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerOptions configure the circuit breaker in front of Redis.
type BreakerOptions struct {
	// Failures is how many calls in a row must fail for the breaker to
	// open; 0 means 3.
	Failures int

	// OpenFor is how long the breaker stays open before it lets one probe
	// call through; 0 means 250ms. A successful probe closes it; a failed
	// one opens it again for OpenFor.
	OpenFor time.Duration
}

// Breaker states, as Stats reports them.
const (
	BreakerClosed   = "closed"    // calls go to Redis
	BreakerOpen     = "open"      // calls fall back at once
	BreakerHalfOpen = "half-open" // one probe call is in flight
)

// breaker is a consecutive-failure circuit breaker. While closed it costs
// one atomic load per call.
type breaker struct {
	open     atomic.Bool  // open or half-open
	failures atomic.Int32 // consecutive failures while closed
	limit    int32
	openFor  time.Duration
	now      func() time.Time

	mu      sync.Mutex
	until   time.Time // while open: when a probe may go
	probing bool      // a probe is in flight
	opened  uint64    // times it opened
}

func newBreaker(o BreakerOptions, now func() time.Time) *breaker {
	b := &breaker{limit: int32(o.Failures), openFor: o.OpenFor, now: now}
	if b.limit <= 0 {
		b.limit = 3
	}
	if b.openFor <= 0 {
		b.openFor = 250 * time.Millisecond
	}
	return b
}

// closed reports whether the breaker is closed: calls go to Redis.
func (b *breaker) closed() bool { return !b.open.Load() }

// allow reports whether a call may go to Redis, and whether it is the
// probe of an open breaker (which must report back with done).
func (b *breaker) allow() (ok, probe bool) {
	if !b.open.Load() {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open.Load() {
		return true, false
	}
	if b.probing || b.now().Before(b.until) {
		return false, false
	}
	b.probing = true
	return true, true
}

// done records a call's outcome: failed reports a failure of Redis. A
// call whose caller gave up reports with abandon instead.
func (b *breaker) done(probe, failed bool) {
	if probe {
		b.mu.Lock()
		b.probing = false
		if failed {
			b.until = b.now().Add(b.openFor)
		} else {
			b.failures.Store(0)
			b.open.Store(false)
		}
		b.mu.Unlock()
		return
	}
	if !failed {
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		return
	}
	if b.failures.Add(1) >= b.limit {
		b.mu.Lock()
		if !b.open.Load() {
			b.open.Store(true)
			b.opened++
			b.until = b.now().Add(b.openFor)
		}
		b.mu.Unlock()
	}
}

// abandon records a call whose outcome says nothing about Redis (its
// caller gave up): an abandoned probe leaves the breaker open, and the
// next call may probe again.
func (b *breaker) abandon(probe bool) {
	if probe {
		b.mu.Lock()
		b.probing = false
		b.mu.Unlock()
	}
}

func (b *breaker) state() (string, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.open.Load():
		return BreakerClosed, b.opened
	case b.probing:
		return BreakerHalfOpen, b.opened
	}
	return BreakerOpen, b.opened
}
