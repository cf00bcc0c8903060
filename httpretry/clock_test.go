package httpretry_test

import (
	"context"
	"slices"
	"sync"
	"time"
)

// clock is a fake clock for a test's client and server. Time moves only
// in Sleep, and only when every worker is asleep (or done): then it jumps
// to the earliest wake-up, as testing/synctest's bubble does, which
// cannot hold real sockets. The test's goroutine is its one worker unless
// it starts more with Go.
type clock struct {
	mu       sync.Mutex
	now      time.Time
	awake    int
	sleepers []*sleeper
	sleeps   []time.Duration
	wg       sync.WaitGroup
}

type sleeper struct {
	until time.Time
	wake  chan struct{}
}

// newClock starts at the real time, to the second, so that the deadlines
// of real contexts read the same on both clocks.
func newClock() *clock {
	return &clock{now: time.Now().Truncate(time.Second), awake: 1}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep records d and returns once the clock has moved d on, or with
// ctx's error if ctx is done first.
func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	s := &sleeper{until: c.now.Add(d), wake: make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	c.awake--
	c.advance()
	c.mu.Unlock()
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-s.wake: // woken meanwhile, and counted awake
		default:
			c.sleepers = slices.DeleteFunc(c.sleepers, func(o *sleeper) bool { return o == s })
			c.awake++
		}
		return ctx.Err()
	}
}

// Go runs f as a worker; Wait waits for the workers, the test's
// goroutine stepping out of the count meanwhile.
func (c *clock) Go(f func()) {
	c.mu.Lock()
	c.awake++
	c.mu.Unlock()
	c.wg.Go(func() {
		defer func() {
			c.mu.Lock()
			c.awake--
			c.advance()
			c.mu.Unlock()
		}()
		f()
	})
}

func (c *clock) Wait() {
	c.mu.Lock()
	c.awake--
	c.advance()
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	c.awake++
	c.mu.Unlock()
}

// Slept returns the sleeps so far.
func (c *clock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

// advance, with c.mu held, moves the clock to the earliest wake-up if no
// worker is awake, and wakes the sleepers due.
func (c *clock) advance() {
	if c.awake > 0 || len(c.sleepers) == 0 {
		return
	}
	next := c.sleepers[0].until
	for _, s := range c.sleepers {
		if s.until.Before(next) {
			next = s.until
		}
	}
	if next.After(c.now) {
		c.now = next
	}
	c.sleepers = slices.DeleteFunc(c.sleepers, func(s *sleeper) bool {
		if s.until.After(c.now) {
			return false
		}
		c.awake++
		close(s.wake)
		return true
	})
}
