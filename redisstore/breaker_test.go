package redisstore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/storetest"
)

// breakerHarness drives one node's breaker on a fake clock, with a liveness
// probe that answers as the test says.
type breakerHarness struct {
	t     *testing.T
	b     *breaker
	set   *breakers
	clock *storetest.Clock
	pings atomic.Int64
	ping  atomic.Pointer[func(ctx context.Context) error]
	logs  *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var _ io.Writer = (*lockedBuffer)(nil)

func newBreakerHarness(t *testing.T, o BreakerOptions) *breakerHarness {
	clock := storetest.NewClock(storetest.Start)
	nh := &breakerHarness{t: t, clock: clock, logs: &lockedBuffer{}}
	nh.set = newBreakers(o, clock.Now, slog.New(slog.NewTextHandler(nh.logs, nil)))
	nh.set.wait = func(d time.Duration) time.Duration { return d } // OpenFor exactly (TestBreakerTrialsSpread tests the jitter)
	nh.set.ping = func(ctx context.Context, _ *breaker) error {
		nh.pings.Add(1)
		return (*nh.ping.Load())(ctx)
	}
	nh.answer(func(context.Context) error { return nil })
	nh.b = newBreaker("redis-1:6379", nh.set)
	t.Cleanup(nh.set.close)
	return nh
}

// answer sets how the next probes answer.
func (nh *breakerHarness) answer(f func(ctx context.Context) error) { nh.ping.Store(&f) }

// settle waits until no probe is in flight.
func (nh *breakerHarness) settle() { nh.set.wg.Wait() }

// call makes one call that the breaker must let through as an ordinary
// (non-trial) call, and reports its outcome; then waits for the probe it
// may have started.
func (nh *breakerHarness) call(o outcome) {
	nh.t.Helper()
	ok, trial := nh.b.allow()
	if !ok || trial {
		nh.t.Fatalf("allow() = %v, %v; want an ordinary call (true, false)", ok, trial)
	}
	nh.b.done(o, false, errOf(o))
	nh.settle()
}

func errOf(o outcome) error {
	switch o {
	case failed:
		return errors.New("connection refused")
	case timedOut:
		return context.DeadlineExceeded
	}
	return nil
}

func (nh *breakerHarness) refused(why string) {
	nh.t.Helper()
	if ok, trial := nh.b.allow(); ok || trial {
		nh.t.Fatalf("%s: allow() = %v, %v; want the call refused (false, false)", why, ok, trial)
	}
}

func (nh *breakerHarness) trial(why string) {
	nh.t.Helper()
	if ok, trial := nh.b.allow(); !ok || !trial {
		nh.t.Fatalf("%s: allow() = %v, %v; want a trial (true, true)", why, ok, trial)
	}
}

func (nh *breakerHarness) want(why, breaker string, slow bool, opens uint64) NodeHealth {
	nh.t.Helper()
	got := nh.b.report()
	if got.Breaker != breaker || got.Slow != slow || got.Opens != opens {
		nh.t.Fatalf("%s: report() = breaker %q, slow %v, %d opens (%q); want %q, %v, %d", why, got.Breaker, got.Slow, got.Opens, got.Reason, breaker, slow, opens)
	}
	return got
}

func TestBreakerDefaults(t *testing.T) {
	bs := newBreakers(BreakerOptions{}, time.Now, slog.Default())
	defer bs.close()
	if bs.probeTimeout != DefaultProbeTimeout || bs.openFor != DefaultOpenFor {
		t.Fatalf("defaults: probe timeout %v, open for %v; want %v, %v", bs.probeTimeout, bs.openFor, DefaultProbeTimeout, DefaultOpenFor)
	}
}

// A busy client: many calls miss their deadline, but Redis answers its
// probes. The breaker never opens; the node is reported slow while the
// misses are at least minSlow and 1 % of the window, and no longer once
// they age out of it.
func TestBreakerLateRepliesAreSlowNotDown(t *testing.T) {
	nh := newBreakerHarness(t, BreakerOptions{})
	for range 500 {
		nh.call(succeeded)
	}
	for i := range minSlow - 1 {
		nh.call(timedOut)
		nh.want("a few misses", BreakerClosed, false, 0)
		if i == 0 && nh.pings.Load() != 1 {
			t.Fatalf("a missed deadline sent %d probes; want 1", nh.pings.Load())
		}
	}
	nh.call(timedOut)
	got := nh.want("minSlow misses in 510 calls", BreakerClosed, true, 0)
	if got.SlowN != minSlow || got.Calls != 500+minSlow || !strings.Contains(got.Reason, "missed their deadline") {
		t.Fatalf("health = %+v; want %d slow of %d calls and the reason", got, minSlow, 500+minSlow)
	}
	if n := nh.pings.Load(); n != minSlow {
		t.Fatalf("%d probes for %d misses, each after the last had answered; want %d", n, minSlow, minSlow)
	}
	if !strings.Contains(nh.logs.String(), "redis node slow") {
		t.Fatalf("no log line when the node turned slow: %q", nh.logs.String())
	}
	nh.refusedNever(t)
	nh.clock.Advance(healthWindow)
	nh.call(succeeded)
	nh.want("the misses aged out", BreakerClosed, false, 0)
	if !strings.Contains(nh.logs.String(), "no longer slow") {
		t.Fatalf("no log line when the node recovered: %q", nh.logs.String())
	}
}

func (nh *breakerHarness) refusedNever(t *testing.T) {
	t.Helper()
	if ok, trial := nh.b.allow(); !ok || trial {
		t.Fatalf("a slow node refused a call: allow() = %v, %v", ok, trial)
	}
}

// Misses are slow from 1 % of the calls since the first miss of the
// window: a handful spread among very many calls is not a slow node.
func TestBreakerFewMissesAmongManyCalls(t *testing.T) {
	nh := newBreakerHarness(t, BreakerOptions{})
	nh.call(timedOut)
	for range 100 * 3 * minSlow {
		nh.b.done(succeeded, false, nil)
	}
	for range 2*minSlow - 1 {
		nh.call(timedOut)
	}
	nh.want("20 misses in the 3020 calls since the first", BreakerClosed, false, 0)
}

// A node that answers, but too late for most calls, for persistLate:
// the breaker opens, so that checks stop waiting out their deadline; a
// shorter spell of lateness, or one where most calls are on time, never
// opens it.
func TestBreakerOpensWhenMostCallsStayLate(t *testing.T) {
	nh := newBreakerHarness(t, BreakerOptions{})
	// late makes two calls of three late, every 100 ms for d or until the
	// breaker refuses one, and returns how long it ran.
	late := func(d time.Duration) time.Duration {
		start := nh.clock.Now()
		for end := start.Add(d); nh.clock.Now().Before(end); nh.clock.Advance(100 * time.Millisecond) {
			for _, o := range []outcome{timedOut, timedOut, succeeded} {
				if ok, _ := nh.b.allow(); !ok {
					return nh.clock.Now().Sub(start)
				}
				nh.b.done(o, false, errOf(o))
				nh.settle()
			}
		}
		return nh.clock.Now().Sub(start)
	}
	late(persistLate - time.Second)
	nh.want("mostly late for less than persistLate", BreakerClosed, true, 0)
	for range 200 { // on time again: the spell ends
		nh.call(succeeded)
	}
	nh.call(timedOut)
	nh.clock.Advance(healthWindow) // the first spell ages out of the window
	late(persistLate - time.Second)
	nh.want("a second spell, shorter than persistLate", BreakerClosed, true, 0)
	if ran := late(2 * time.Second); ran >= 2*time.Second {
		t.Fatalf("the breaker let calls through for %v more, the spell having lasted longer than %v", ran, persistLate)
	}
	got := nh.want("mostly late for persistLate", BreakerOpen, false, 1)
	if !strings.Contains(got.Reason, "most calls missed their deadline for 5s") {
		t.Fatalf("reason %q; want it to say the calls stayed late", got.Reason)
	}

	// A third of the calls late, for ever: slow, never open.
	nh2 := newBreakerHarness(t, BreakerOptions{})
	for range 600 {
		nh2.call(timedOut)
		nh2.call(succeeded)
		nh2.call(succeeded)
		nh2.clock.Advance(100 * time.Millisecond)
	}
	nh2.want("a third late for a minute", BreakerClosed, true, 0)
}

// A frozen server: calls miss their deadline and the probe gets no reply
// within ProbeTimeout. The breaker opens, with the reason, and logs it.
func TestBreakerOpensWhenProbeGetsNoReply(t *testing.T) {
	nh := newBreakerHarness(t, BreakerOptions{ProbeTimeout: time.Millisecond})
	nh.answer(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	nh.call(timedOut)
	got := nh.want("after a probe with no reply", BreakerOpen, false, 1)
	if !strings.Contains(got.Reason, "no reply to a PING within 1ms") {
		t.Fatalf("reason %q; want it to name the probe's timeout", got.Reason)
	}
	if !strings.Contains(nh.logs.String(), "circuit breaker open") || !strings.Contains(nh.logs.String(), "redis-1:6379") {
		t.Fatalf("no log line naming the node when the breaker opened: %q", nh.logs.String())
	}
	nh.refused("open")
}

// A dead server: a call fails, and so does the probe.
func TestBreakerOpensWhenProbeFails(t *testing.T) {
	nh := newBreakerHarness(t, BreakerOptions{})
	nh.answer(func(context.Context) error { return errors.New("dial tcp: connection refused") })
	nh.call(failed)
	got := nh.want("after a failed probe", BreakerOpen, false, 1)
	if !strings.Contains(got.Reason, "connection refused") {
		t.Fatalf("reason %q; want the probe's error", got.Reason)
	}
}

// A server that answers PING but fails the calls (out of memory, say):
// the breaker opens once at least minFailures calls of the window failed,
// and half of the calls since the first of them — not before.
func TestBreakerOpensOnFailureRate(t *testing.T) {
	nh := newBreakerHarness(t, BreakerOptions{})
	for range 2 * minFailures { // a third fail
		nh.call(failed)
		nh.call(succeeded)
		nh.call(succeeded)
	}
	nh.want("20 failures in 60 calls", BreakerClosed, false, 0)
	for range 2*minFailures - 1 {
		nh.call(failed)
	}
	nh.want("39 failures in 79 calls", BreakerClosed, false, 0)
	nh.call(failed)
	got := nh.want("40 failures in 80 calls", BreakerOpen, false, 1)
	if !strings.Contains(got.Reason, "40 of 80 calls") {
		t.Fatalf("reason %q; want the counts", got.Reason)
	}

	// Failures of an earlier window do not count.
	nh2 := newBreakerHarness(t, BreakerOptions{})
	for range minFailures - 1 {
		nh2.call(failed)
	}
	nh2.clock.Advance(healthWindow)
	nh2.call(failed)
	nh2.want("failures spread over two windows", BreakerClosed, false, 0)
}

// An open breaker refuses calls for OpenFor, then lets one trial through
// at a time: a failed or late trial keeps it open for another OpenFor, a
// canceled one frees the slot at once, a successful one closes it.
func TestBreakerTrials(t *testing.T) {
	const openFor = time.Second
	nh := newBreakerHarness(t, BreakerOptions{OpenFor: openFor})
	nh.answer(func(context.Context) error { return errors.New("refused") })
	nh.call(failed)
	nh.want("opened", BreakerOpen, false, 1)
	nh.clock.Advance(openFor - time.Nanosecond)
	nh.refused("just before OpenFor")
	nh.clock.Advance(time.Nanosecond)
	nh.trial("OpenFor after it opened")
	nh.want("a trial in flight", BreakerHalfOpen, false, 1)
	nh.refused("a second call while the trial is in flight")
	nh.b.done(abandoned, true, context.Canceled)
	nh.trial("after a canceled trial")
	nh.b.done(timedOut, true, context.DeadlineExceeded)
	nh.want("after a late trial", BreakerOpen, false, 1)
	nh.refused("right after a late trial")
	nh.clock.Advance(openFor)
	nh.trial("OpenFor after the late trial")
	nh.b.done(failed, true, errors.New("refused"))
	nh.refused("right after a failed trial")
	nh.clock.Advance(openFor)
	nh.trial("OpenFor after the failed trial")
	nh.b.done(succeeded, true, nil)
	nh.want("after a successful trial", BreakerClosed, false, 1)
	if !strings.Contains(nh.logs.String(), "circuit breaker closed") {
		t.Fatalf("no log line when the breaker closed: %q", nh.logs.String())
	}
	if n := nh.pings.Load(); n != 1 {
		t.Fatalf("%d probes; want 1: an open breaker is tested by trials, not probes", n)
	}
	// Closed afresh: the failures that opened it are forgotten.
	nh.answer(func(context.Context) error { return nil })
	nh.call(failed)
	nh.want("one failure after closing", BreakerClosed, false, 1)
}

// A call whose caller canceled says nothing of its node: it counts
// nowhere, starts no probe, and leaves the breaker as it was, closed or
// open; an open one keeps its trial time (a canceled trial frees the trial
// at once: see TestBreakerTrials).
func TestBreakerCanceledCallSaysNothing(t *testing.T) {
	const openFor = time.Second
	nh := newBreakerHarness(t, BreakerOptions{OpenFor: openFor})
	nh.answer(func(context.Context) error { return errors.New("refused") })
	for range 2 * minFailures {
		nh.call(abandoned)
	}
	got := nh.want("after canceled calls", BreakerClosed, false, 0)
	if got.Calls != 0 || got.Failures != 0 || got.SlowN != 0 || got.LastErr != nil || nh.pings.Load() != 0 {
		t.Fatalf("after %d canceled calls: %+v and %d probes; want no count, no error, no probe", 2*minFailures, got, nh.pings.Load())
	}
	nh.call(failed) // and its probe fails
	nh.want("after a failure and a failed probe", BreakerOpen, false, 1)
	nh.clock.Advance(openFor / 2)
	for range 2 * minFailures {
		nh.b.done(abandoned, false, context.Canceled)
	}
	nh.want("after canceled stragglers while open", BreakerOpen, false, 1)
	nh.clock.Advance(openFor/2 - time.Nanosecond)
	nh.refused("canceled stragglers do not move the trial time")
	nh.clock.Advance(time.Nanosecond)
	nh.trial("OpenFor after it opened")
	if got := nh.b.report(); got.Calls != 1 || nh.pings.Load() != 1 {
		t.Fatalf("report() = %+v after %d probes; want the one failed call counted, and its one probe", got, nh.pings.Load())
	}
}

// Calls let through while the breaker was closed may report after it
// opened; they must neither close it nor move its trial time.
func TestBreakerStragglers(t *testing.T) {
	const openFor = time.Second
	nh := newBreakerHarness(t, BreakerOptions{OpenFor: openFor})
	nh.answer(func(context.Context) error { return errors.New("refused") })
	for range 3 {
		if ok, trial := nh.b.allow(); !ok || trial {
			t.Fatalf("closed: allow() = %v, %v", ok, trial)
		}
	}
	nh.b.done(failed, false, errors.New("refused"))
	nh.settle()
	nh.want("a failure and a failed probe", BreakerOpen, false, 1)
	nh.clock.Advance(openFor / 2)
	nh.b.done(succeeded, false, nil)
	nh.want("a straggler succeeded while open", BreakerOpen, false, 1)
	nh.b.done(timedOut, false, context.DeadlineExceeded)
	nh.settle()
	nh.want("a straggler was late while open", BreakerOpen, false, 1)
	nh.refused("stragglers do not move the trial time")
	nh.clock.Advance(openFor - openFor/2)
	nh.trial("OpenFor after it opened, whatever the stragglers did")
	if n := nh.pings.Load(); n != 1 {
		t.Fatalf("%d probes; want 1: stragglers of an open breaker start none", n)
	}
}

// Many goroutines failing at once open the breaker exactly once, start at
// most one probe at a time, and once open only one gets each trial.
func TestBreakerConcurrent(t *testing.T) {
	nh := newBreakerHarness(t, BreakerOptions{OpenFor: time.Minute})
	var inFlight, most atomic.Int64
	nh.answer(func(context.Context) error {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		inFlight.Add(-1)
		return errors.New("refused")
	})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			<-start
			for range 100 {
				if ok, trial := nh.b.allow(); ok {
					nh.b.done(failed, trial, errors.New("refused"))
				}
			}
		})
	}
	close(start)
	wg.Wait()
	nh.settle()
	nh.want("after 6400 concurrent failing calls on a frozen clock", BreakerOpen, false, 1)
	// Whether a probe ran at all depends on the scheduling: the failure
	// rate may open the breaker before the first probe's goroutine runs,
	// and an open breaker starts no probe. The property is the bound.
	if m := most.Load(); m > 1 {
		t.Fatalf("%d probes in flight at once; want at most 1", m)
	}
	nh.clock.Advance(time.Minute)
	var trials atomic.Int64
	start = make(chan struct{})
	for range 64 {
		wg.Go(func() {
			<-start
			if _, trial := nh.b.allow(); trial {
				trials.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := trials.Load(); n != 1 {
		t.Fatalf("%d goroutines got the trial; want exactly 1", n)
	}
}

// Closing the store's breakers stops a probe in flight: no goroutine is
// left (goleak checks the package), and the breaker does not open for it.
func TestBreakerCloseStopsProbes(t *testing.T) {
	nh := newBreakerHarness(t, BreakerOptions{ProbeTimeout: time.Hour})
	started := make(chan struct{})
	nh.answer(func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() })
	nh.b.done(timedOut, false, context.DeadlineExceeded)
	<-started
	nh.set.close()
	nh.want("closed while probing", BreakerClosed, false, 0)
	nh.b.done(timedOut, false, context.DeadlineExceeded)
	nh.settle()
	if n := nh.pings.Load(); n != 1 {
		t.Fatalf("%d probes after close; want none more", n-1)
	}
}

func TestClassify(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want outcome
	}{
		{"reply", context.Background(), nil, succeeded},
		{"store deadline", context.Background(), wrap(context.DeadlineExceeded), timedOut},
		{"caller deadline", expired, wrap(context.DeadlineExceeded), timedOut},
		{"caller canceled", canceled, wrap(context.Canceled), abandoned},
		{"caller canceled, call failed", canceled, errors.New("EOF"), abandoned},
		{"connection refused", context.Background(), wrap(errors.New("dial tcp: connection refused")), failed},
		{"error reply", context.Background(), wrap(errors.New("OOM command not allowed")), failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.ctx, tt.err); got != tt.want {
				t.Fatalf("classify(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// TestBreakerTrialsSpread opens the breakers of many instances at one
// instant, as a Redis restarted for maintenance does: their trials, and
// so their reconnections, must not all go at the same instant, and each
// must go between OpenFor/2 and 3·OpenFor/2 after it opened; a failed
// trial waits as long again, drawn anew.
func TestBreakerTrialsSpread(t *testing.T) {
	const openFor, instances = 200 * time.Millisecond, 32
	clock := storetest.NewClock(storetest.Start)
	var bs []*breaker
	for range instances {
		set := newBreakers(BreakerOptions{OpenFor: openFor}, clock.Now, slog.New(slog.DiscardHandler))
		t.Cleanup(set.close)
		bs = append(bs, newBreaker("redis-1:6379", set))
	}
	spread := func(what string) {
		t.Helper()
		start := clock.Now()
		distinct := map[time.Time]bool{}
		for i, b := range bs {
			b.mu.Lock()
			until := b.until
			b.mu.Unlock()
			distinct[until] = true
			if wait := until.Sub(start); wait < openFor/2 || wait >= 3*openFor/2 {
				t.Errorf("%s: instance %d waits %v before its trial, want within [%v, %v)", what, i, wait, openFor/2, 3*openFor/2)
			}
		}
		if len(distinct) < instances/2 {
			t.Errorf("%s: the %d instances' trials go at %d distinct instants, want them spread (at least %d)", what, instances, len(distinct), instances/2)
		}
	}
	for _, b := range bs {
		b.trip(clock.Now(), "test")
	}
	spread("opened together")
	clock.Advance(3 * openFor / 2)
	for i, b := range bs {
		ok, trial := b.allow()
		if !ok || !trial {
			t.Fatalf("instance %d, 3·OpenFor/2 after it opened: allow() = %v, %v; want its trial", i, ok, trial)
		}
		b.done(failed, true, errors.New("connection refused"))
	}
	spread("trials failed together")
}

// TestJittered draws waits for a nominal d: each within [d/2, 3d/2), d
// on average, never the same for long.
func TestJittered(t *testing.T) {
	const d, n = 100 * time.Millisecond, 10000
	var sum time.Duration
	distinct := map[time.Duration]bool{}
	for range n {
		w := jittered(d)
		if w < d/2 || w >= 3*d/2 {
			t.Fatalf("jittered(%v) = %v, want within [%v, %v)", d, w, d/2, 3*d/2)
		}
		sum += w
		distinct[w] = true
	}
	if mean := sum / n; mean < 95*d/100 || mean > 105*d/100 {
		t.Errorf("mean of %d waits %v, want %v within 5%%", n, mean, d)
	}
	if len(distinct) < n/2 {
		t.Errorf("%d distinct waits of %d, want them spread", len(distinct), n)
	}
	for _, d := range []time.Duration{0, 1} {
		if w := jittered(d); w != d {
			t.Errorf("jittered(%v) = %v, want %v", d, w, d)
		}
	}
}
