package memstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultResolution is the step of the clock of a store whose Options leave
// Resolution at 0.
const DefaultResolution = time.Millisecond

// minResolution bounds how often a store's clock goroutine wakes up.
const minResolution = 100 * time.Microsecond

// idleAfter is how long a clock goroutine keeps ticking without a check
// reading its time before it stops; the next check starts it again.
const idleAfter = 50 * time.Millisecond

// monotonic returns a clock of Unix nanoseconds that follows the process's
// monotonic clock from the wall-clock time of its making: windows stay
// aligned to the Unix epoch, and the clock never steps back.
func monotonic() func() int64 {
	start := time.Now()
	anchor := start.UnixNano()
	return func() int64 { return anchor + int64(time.Since(start)) }
}

// ticking is a clock that a goroutine advances every resolution, so that
// reading it costs an atomic load instead of a system clock read. The
// goroutine starts with the first read, stops by itself once no check has
// read the clock for idleAfter, and starts again with the next read; so a
// store that is dropped without Close leaves nothing running for long.
type ticking struct {
	now  atomic.Int64 // the published time; 0 while no goroutine publishes it
	used atomic.Bool  // the time was read since the last tick

	read       func() int64 // the exact clock
	resolution time.Duration
	idleTicks  int
	closed     atomic.Bool

	mu      sync.Mutex // guards running, stop, done and starting or stopping the goroutine
	running bool
	stop    chan struct{}
	done    chan struct{}
}

func newTicking(resolution time.Duration, read func() int64) *ticking {
	resolution = max(resolution, minResolution)
	return &ticking{
		read:       read,
		resolution: resolution,
		idleTicks:  max(2, int((idleAfter+resolution-1)/resolution)),
	}
}

// load returns the published time, starting the goroutine if none
// publishes it.
func (c *ticking) load() int64 {
	if v := c.now.Load(); v != 0 {
		if !c.used.Load() {
			c.used.Store(true)
		}
		return v
	}
	return c.start()
}

// start reads the exact clock and, unless the clock is closed or already
// running, publishes that time and starts the goroutine.
func (c *ticking) start() int64 {
	v := c.read()
	if c.closed.Load() {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running || c.closed.Load() {
		return v
	}
	c.running = true
	c.used.Store(true)
	c.now.Store(v)
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.run(c.stop, c.done)
	return v
}

func (c *ticking) run(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(c.resolution)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if c.used.Swap(false) {
			idle = 0
		} else if idle++; idle >= c.idleTicks && c.stopIdle() {
			return
		}
		c.now.Store(c.read())
	}
}

// stopIdle unpublishes the time and reports true, unless a check read it
// meanwhile.
func (c *ticking) stopIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used.Load() || !c.running {
		return false
	}
	c.now.Store(0)
	c.running = false
	return true
}

// Close stops the goroutine, if it runs, and waits for it; later reads are
// exact.
func (c *ticking) Close() {
	c.mu.Lock()
	c.closed.Store(true)
	running, stop, done := c.running, c.stop, c.done
	c.running = false
	c.mu.Unlock()
	if running {
		close(stop)
		<-done
	}
	c.now.Store(0)
}

// running reports whether the goroutine runs, for tests.
func (c *ticking) isRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}
