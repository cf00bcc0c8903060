package redisstore

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the tests move by hand; safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// breakerHarness drives one breaker on a fake clock and checks what it
// answers.
type breakerHarness struct {
	t     *testing.T
	b     *breaker
	clock *fakeClock
}

func newBreakerHarness(t *testing.T, o BreakerOptions) *breakerHarness {
	clock := newFakeClock()
	return &breakerHarness{t: t, b: newBreaker(o, clock.now), clock: clock}
}

// call makes one call that the breaker must let through as an ordinary
// (non-probe) call, and reports its outcome.
func (h *breakerHarness) call(failed bool) {
	h.t.Helper()
	ok, probe := h.b.allow()
	if !ok || probe {
		h.t.Fatalf("allow() = %v, %v; want an ordinary call (true, false)", ok, probe)
	}
	h.b.done(false, failed)
}

// refused asserts that the breaker keeps a call from Redis.
func (h *breakerHarness) refused(why string) {
	h.t.Helper()
	if ok, probe := h.b.allow(); ok || probe {
		h.t.Fatalf("%s: allow() = %v, %v; want the call refused (false, false)", why, ok, probe)
	}
}

// probe asserts that the breaker lets one probe through.
func (h *breakerHarness) probe(why string) {
	h.t.Helper()
	if ok, probe := h.b.allow(); !ok || !probe {
		h.t.Fatalf("%s: allow() = %v, %v; want a probe (true, true)", why, ok, probe)
	}
}

func (h *breakerHarness) wantState(why, state string, opens uint64) {
	h.t.Helper()
	gotState, gotOpens := h.b.state()
	if gotState != state || gotOpens != opens {
		h.t.Fatalf("%s: state() = %q, %d opens; want %q, %d opens", why, gotState, gotOpens, state, opens)
	}
}

func TestBreakerDefaults(t *testing.T) {
	h := newBreakerHarness(t, BreakerOptions{})
	h.wantState("new", BreakerClosed, 0)
	h.call(true)
	h.call(true)
	h.wantState("after 2 failures (default threshold 3)", BreakerClosed, 0)
	h.call(true)
	h.wantState("after 3 failures", BreakerOpen, 1)
	h.clock.advance(250*time.Millisecond - time.Nanosecond)
	h.refused("1ns before the default OpenFor of 250ms")
	h.clock.advance(time.Nanosecond)
	h.probe("at the default OpenFor of 250ms")
}

func TestBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		h := newBreakerHarness(t, BreakerOptions{Failures: n, OpenFor: time.Second})
		for i := 1; i < n; i++ {
			h.call(true)
			h.wantState("after fewer failures than the threshold", BreakerClosed, 0)
		}
		h.call(true)
		h.wantState("after threshold failures", BreakerOpen, 1)
		for range 3 {
			h.refused("open")
		}
		h.wantState("after refused calls", BreakerOpen, 1)
	}
}

func TestBreakerSuccessResetsFailures(t *testing.T) {
	h := newBreakerHarness(t, BreakerOptions{Failures: 3, OpenFor: time.Second})
	for range 5 {
		h.call(true)
		h.call(true)
		h.call(false) // breaks the run of failures
		h.wantState("two failures, then a success, repeatedly", BreakerClosed, 0)
	}
	h.call(true)
	h.call(true)
	h.wantState("two failures after a success", BreakerClosed, 0)
	h.call(true)
	h.wantState("three failures in a row", BreakerOpen, 1)
}

func TestBreakerOpenRefusesUntilOpenFor(t *testing.T) {
	const openFor = 10 * time.Second
	h := newBreakerHarness(t, BreakerOptions{Failures: 1, OpenFor: openFor})
	h.call(true)
	h.wantState("opened", BreakerOpen, 1)
	for _, d := range []time.Duration{0, time.Second, 4 * time.Second, 4*time.Second - time.Nanosecond} {
		h.clock.advance(d) // to 0, 1s, 5s, 9s-1ns after it opened
		h.refused("before OpenFor has passed")
	}
	h.clock.advance(time.Second)
	h.refused("1ns before OpenFor has passed")
	h.wantState("still open", BreakerOpen, 1)
	h.clock.advance(time.Nanosecond)
	h.probe("once OpenFor has passed")
	h.wantState("probing", BreakerHalfOpen, 1)
}

func TestBreakerOneProbeAtATime(t *testing.T) {
	h := newBreakerHarness(t, BreakerOptions{Failures: 1, OpenFor: time.Second})
	h.call(true)
	h.clock.advance(time.Second)
	h.probe("first call after OpenFor")
	for _, d := range []time.Duration{0, time.Second, time.Hour} {
		h.clock.advance(d)
		h.refused("while the probe is in flight")
		h.wantState("while the probe is in flight", BreakerHalfOpen, 1)
	}
}

func TestBreakerProbeSuccessCloses(t *testing.T) {
	h := newBreakerHarness(t, BreakerOptions{Failures: 2, OpenFor: time.Second})
	h.call(true)
	h.call(true)
	h.clock.advance(time.Second)
	h.probe("after OpenFor")
	h.b.done(true, false)
	h.wantState("after a successful probe", BreakerClosed, 1)
	for range 3 {
		h.call(false)
	}
	// The failures before it opened are forgotten: it takes the full
	// threshold again to open it.
	h.call(true)
	h.wantState("one failure after closing", BreakerClosed, 1)
	h.call(true)
	h.wantState("two failures after closing", BreakerOpen, 2)
}

func TestBreakerProbeFailureReopens(t *testing.T) {
	const openFor = time.Second
	h := newBreakerHarness(t, BreakerOptions{Failures: 1, OpenFor: openFor})
	h.call(true)
	h.clock.advance(openFor)
	h.probe("after OpenFor")
	// The probe takes a while to fail; OpenFor counts from its failure.
	h.clock.advance(300 * time.Millisecond)
	h.b.done(true, true)
	// BreakerOpens counts the times it opened from closed; a failed probe
	// keeps it open.
	h.wantState("after a failed probe", BreakerOpen, 1)
	h.clock.advance(openFor - time.Nanosecond)
	h.refused("1ns before OpenFor after the failed probe")
	h.clock.advance(time.Nanosecond)
	h.probe("OpenFor after the failed probe")
	h.b.done(true, true)
	h.wantState("after a second failed probe", BreakerOpen, 1)
	h.clock.advance(openFor)
	h.probe("OpenFor after the second failed probe")
	h.b.done(true, false)
	h.wantState("after a successful probe", BreakerClosed, 1)
	h.call(false)
}

// A call whose caller gave up is neither a failure nor a success: it does
// not break a run of failures, and an abandoned probe neither closes the
// breaker nor blocks the next probe.
func TestBreakerAbandon(t *testing.T) {
	const openFor = time.Second
	h := newBreakerHarness(t, BreakerOptions{Failures: 2, OpenFor: openFor})
	h.call(true)
	if ok, probe := h.b.allow(); !ok || probe {
		t.Fatalf("closed: allow() = %v, %v", ok, probe)
	}
	h.b.abandon(false)
	h.wantState("a failure, then an abandoned call", BreakerClosed, 0)
	h.call(true)
	h.wantState("a failure, an abandoned call, a failure", BreakerOpen, 1)

	h.clock.advance(openFor)
	h.probe("after OpenFor")
	h.b.abandon(true)
	h.wantState("after an abandoned probe", BreakerOpen, 1)
	h.probe("right after an abandoned probe")
	h.b.done(true, false)
	h.wantState("after a successful probe", BreakerClosed, 1)
}

// Calls let through while the breaker was closed may report after it
// opened; they must neither close it nor move its probe time.
func TestBreakerStragglers(t *testing.T) {
	const openFor = time.Second
	h := newBreakerHarness(t, BreakerOptions{Failures: 2, OpenFor: openFor})
	var late int
	for range 4 { // four calls go out while it is closed
		if ok, probe := h.b.allow(); !ok || probe {
			t.Fatalf("closed: allow() = %v, %v", ok, probe)
		}
		late++
	}
	h.b.done(false, true)
	h.b.done(false, true)
	late -= 2
	h.wantState("two failures", BreakerOpen, 1)

	h.clock.advance(openFor / 2)
	h.b.done(false, false) // a straggler succeeds
	late--
	h.wantState("a straggler succeeded while open", BreakerOpen, 1)
	h.refused("a straggler's success does not close it")
	h.b.done(false, true) // a straggler fails
	late--
	h.wantState("a straggler failed while open", BreakerOpen, 1)
	if late != 0 {
		t.Fatal("test bug: calls left unreported")
	}
	h.clock.advance(openFor - openFor/2)
	h.probe("OpenFor after it opened, whatever the stragglers did")

	// A straggler failing while the probe is in flight changes nothing.
	h.b.done(false, true)
	h.wantState("a straggler failed while half-open", BreakerHalfOpen, 1)
	h.b.done(true, false)
	h.wantState("after the probe succeeded", BreakerClosed, 1)
}

// Many goroutines failing at once open the breaker exactly once, and once
// open it lets no call through until OpenFor has passed.
func TestBreakerConcurrentFailuresOpenOnce(t *testing.T) {
	h := newBreakerHarness(t, BreakerOptions{Failures: 5, OpenFor: time.Minute})
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		through atomic.Int64
		probes  atomic.Int64
	)
	for range 64 {
		wg.Go(func() {
			<-start
			for range 100 {
				ok, probe := h.b.allow()
				if probe {
					probes.Add(1)
				}
				if ok {
					through.Add(1)
					h.b.done(probe, true)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	h.wantState("after 6400 concurrent failing calls on a frozen clock", BreakerOpen, 1)
	if n := probes.Load(); n != 0 {
		t.Errorf("%d probes before OpenFor passed; want none", n)
	}
	if n := through.Load(); n < 5 || n > 64*100 {
		t.Errorf("%d calls let through; want at least the threshold of 5", n)
	}
	h.refused("after the burst")

	// Once OpenFor has passed, of 64 goroutines asking at once exactly one
	// gets the probe.
	h.clock.advance(time.Minute)
	var got atomic.Int64
	start = make(chan struct{})
	for range 64 {
		wg.Go(func() {
			<-start
			ok, probe := h.b.allow()
			if ok != probe {
				t.Errorf("open breaker: allow() = %v, %v; want a probe or a refusal", ok, probe)
			}
			if probe {
				got.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := got.Load(); n != 1 {
		t.Fatalf("%d goroutines got the probe; want exactly 1", n)
	}
	h.wantState("probe in flight", BreakerHalfOpen, 1)
	h.b.done(true, false)
	h.wantState("after the probe succeeded", BreakerClosed, 1)
}

// Random concurrent use: calls fail and succeed, the clock moves, probes
// come and go. At most one probe is ever in flight, and afterwards the
// breaker is in a state its API can get out of.
func TestBreakerConcurrentConsistent(t *testing.T) {
	const openFor = time.Millisecond
	h := newBreakerHarness(t, BreakerOptions{Failures: 3, OpenFor: openFor})
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		inFlight atomic.Int64 // probes in flight
		probes   atomic.Int64
	)
	for g := range 64 {
		wg.Go(func() {
			<-start
			rnd := uint64(g)*0x9e3779b97f4a7c15 + 1
			next := func() uint64 { // xorshift
				rnd ^= rnd << 13
				rnd ^= rnd >> 7
				rnd ^= rnd << 17
				return rnd
			}
			for range 500 {
				if next()%8 == 0 {
					h.clock.advance(time.Duration(next() % uint64(openFor)))
				}
				ok, probe := h.b.allow()
				if !ok {
					if probe {
						t.Error("allow() = false, true")
					}
					continue
				}
				if probe {
					probes.Add(1)
					if n := inFlight.Add(1); n != 1 {
						t.Errorf("%d probes in flight at once", n)
					}
					if st, _ := h.b.state(); st != BreakerHalfOpen {
						t.Errorf("state() = %q while a probe is in flight; want %q", st, BreakerHalfOpen)
					}
				}
				failed := next()%3 != 0 // mostly failing, so that it opens often
				if probe {
					inFlight.Add(-1)
				}
				h.b.done(probe, failed)
			}
		})
	}
	close(start)
	wg.Wait()
	if probes.Load() == 0 {
		t.Fatal("no probe was ever let through: the test did not exercise the open breaker")
	}
	st, opens := h.b.state()
	if st == BreakerHalfOpen {
		t.Fatalf("state() = %q with no call in flight", st)
	}
	if opens == 0 {
		t.Fatalf("state() reports %d opens after mostly failing calls", opens)
	}
	// Whatever state it ended in, one probe after OpenFor closes it.
	h.clock.advance(openFor)
	if ok, probe := h.b.allow(); !ok {
		t.Fatalf("allow() after OpenFor with nothing in flight = %v, %v", ok, probe)
	} else {
		h.b.done(probe, false)
	}
	h.wantState("after a successful call", BreakerClosed, opens)
	h.call(false)
}
