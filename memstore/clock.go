package memstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// monotonic returns a clock of Unix nanoseconds that follows the process's
// monotonic clock from the wall-clock time of its making: windows stay
// aligned to the Unix epoch, and the clock never steps back.
func monotonic() func() int64 {
	start := time.Now()
	anchor := start.UnixNano()
	return func() int64 { return anchor + int64(time.Since(start)) }
}

// ticking is a clock that a goroutine advances every resolution, so that
// reading it costs one atomic load instead of a system clock read. It
// never runs behind by more than about one resolution.
type ticking struct {
	now  atomic.Int64 // 0 once stopped: Store.clock reads the exact clock instead
	read func() int64 // the exact clock
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func startTicking(resolution time.Duration, read func() int64) *ticking {
	c := &ticking{read: read, stop: make(chan struct{}), done: make(chan struct{})}
	c.now.Store(read())
	go c.run(resolution)
	return c
}

func (c *ticking) run(resolution time.Duration) {
	defer close(c.done)
	t := time.NewTicker(resolution)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.now.Store(c.read())
		case <-c.stop:
			return
		}
	}
}

// Stop ends the goroutine and waits for it; later reads are exact.
func (c *ticking) Stop() {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		c.now.Store(0)
	})
}
