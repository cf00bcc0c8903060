package memstore

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The clock's goroutine starts with the first read, publishes times in
// order, stops by itself once nobody reads, and starts again.
func TestTickingStartsStopsRestarts(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var exact atomic.Int64
	exact.Store(1000)
	c := newTicking(minResolution, func() int64 { return exact.Add(1) })
	defer c.Close()
	if c.isRunning() {
		t.Fatal("running before the first read")
	}
	first := c.load()
	if !c.isRunning() {
		t.Fatal("not running after the first read")
	}
	// Reads never go back while the clock ticks.
	prev := first
	for i := 0; i < 1000; i++ {
		v := c.load()
		if v < prev {
			t.Fatalf("read %d: %d after %d", i, v, prev)
		}
		prev = v
	}
	// Without reads the goroutine stops (within idleAfter plus a few
	// ticks; the deadline here is only a bound against hanging).
	deadline := time.Now().Add(10 * time.Second)
	for c.isRunning() {
		if time.Now().After(deadline) {
			t.Fatal("the clock goroutine did not stop while idle")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := c.now.Load(); v != 0 {
		t.Fatalf("a stopped clock still publishes %d", v)
	}
	again := c.load()
	if again < prev {
		t.Fatalf("after restart: %d, before %d", again, prev)
	}
	if !c.isRunning() {
		t.Fatal("not running after a read restarted it")
	}
}

// Close while many goroutines read and the clock stops and starts: no
// read after Close starts it again, and nothing is left running.
func TestTickingCloseUnderReads(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var exact atomic.Int64
	c := newTicking(minResolution, func() int64 { return exact.Add(1) })
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					if c.load() <= 0 {
						t.Error("non-positive time")
						return
					}
				}
			}
		})
	}
	time.Sleep(10 * time.Millisecond)
	c.Close()
	close(stop)
	wg.Wait()
	c.load()
	if c.isRunning() {
		t.Fatal("running after Close")
	}
}
