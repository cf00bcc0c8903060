package storetest

import (
	"sync"
	"time"
)

// Start is the instant suites start clocks at: 2026-01-05T00:00:00Z, a
// Monday at midnight, aligned to every window length the tables use
// (1ns to one day).
var Start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// Clock is a fake clock, safe for concurrent use. Stores take its Now
// method as their clock; tests move it with Advance and Set.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads start until it is moved.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
