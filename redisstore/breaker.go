package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Breakers. A store keeps one circuit breaker per Redis node: one for a
// standalone server (or Sentinel's master), one per master of a Cluster,
// so that a dead master degrades the keys of its own slots only. A
// breaker opens on evidence that its node is failing, never because the
// store saw a few late replies on a busy machine:
//
//   - a liveness probe failed: a PING that got an error or no reply within
//     BreakerOptions.ProbeTimeout. A probe starts when a call fails or
//     misses its deadline and none is in flight for the node, so a busy
//     client whose replies come late (but come) keeps its breaker closed,
//     while a frozen server, a dead one, or one that refuses connections
//     opens it within ProbeTimeout;
//   - or most calls fail: at least minFailures calls of the last
//     healthWindow ended in an error, and at least half of the calls
//     made since the first of them (a server out of memory, a Cluster
//     that is down).
//
// A call that missed its deadline is slow, not failed: it is counted, and
// a node is reported slow (Health, metrics, a log line) while at least
// minSlow calls of the last healthWindow were, and 1 % of the calls since
// the first of them; the checks whose replies were late decided by their
// limits' policy. If most calls keep missing their deadline for
// persistLate, the breaker opens too (see lateTooLong).
//
// An open breaker keeps calls from its node for OpenFor, jittered (see
// jittered); then one call goes through as a trial: its success closes
// the breaker, its failure keeps it open for another jittered OpenFor.
const (
	healthWindow  = 10 * time.Second
	windowBuckets = 10 // of healthWindow/windowBuckets each
	minFailures   = 10
	minSlow       = 10
	persistLate   = 5 * time.Second
)

// DefaultProbeTimeout and DefaultOpenFor are the breaker's defaults.
const (
	DefaultProbeTimeout = 500 * time.Millisecond
	DefaultOpenFor      = 250 * time.Millisecond
)

// BreakerOptions configure the circuit breakers, one per Redis node.
type BreakerOptions struct {
	// ProbeTimeout is how long a liveness probe (a PING to the node, sent
	// when a call fails or misses its deadline) waits for its reply
	// before the node counts as down and its breaker opens; 0 means
	// DefaultProbeTimeout. Keep it well above the slowest reply a busy
	// but healthy Redis gives: a probe that times out switches the node's
	// keys to their failure policy.
	ProbeTimeout time.Duration

	// OpenFor is how long an open breaker keeps calls from its node
	// before it lets one through as a trial, on average; 0 means
	// DefaultOpenFor. Each wait is drawn anew, uniformly between half
	// and one and a half times OpenFor, so that the instances whose
	// breakers opened together (a Redis restarted for maintenance) do
	// not send their trials, and their reconnections, together.
	OpenFor time.Duration
}

// Breaker states, as Health reports them.
const (
	BreakerClosed   = "closed"    // calls go to Redis
	BreakerOpen     = "open"      // calls fall back at once
	BreakerHalfOpen = "half-open" // open, with one trial call in flight
)

// outcome is what a call to a node tells of its health.
type outcome uint8

const (
	succeeded outcome = iota // a reply in time
	failed                   // an error: no connection, or an error reply
	timedOut                 // no reply by the call's deadline
	abandoned                // the caller canceled: says nothing
)

// breaker is one Redis node's circuit breaker and counts. While closed, a
// call costs it one atomic load before and a few atomic adds after. Its
// clock, options, logger and liveness probe are its set's.
type breaker struct {
	addr string
	set  *breakers

	open atomic.Bool // open or half-open
	slow atomic.Bool // reported slow (see refreshSlow)

	calls, failures, slowCalls atomic.Uint64 // since the store started
	win                        window

	mu      sync.Mutex
	probing bool      // a liveness probe is in flight
	trial   bool      // open: a trial call is in flight
	until   time.Time // open: when the next trial may go
	since   time.Time // open, or slow: since when
	reason  string    // open: why; slow: the figures
	opens   uint64
	lastErr error

	lateSince time.Time // since when most calls have missed their deadline (see lateTooLong)
}

func newBreaker(addr string, set *breakers) *breaker {
	b := &breaker{addr: addr, set: set}
	b.win.reset()
	return b
}

// recent sums the failures and slow calls of the last healthWindow before
// t, and counts the calls made since the first of them.
func (b *breaker) recent(t time.Time) (calls, failures, slow uint64) {
	return b.win.sum(t, b.calls.Load())
}

// allow reports whether a call may go to the node, and whether it is the
// trial of an open breaker (which must report with done).
func (b *breaker) allow() (ok, trial bool) {
	if !b.open.Load() {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open.Load() {
		return true, false
	}
	if b.trial || b.set.now().Before(b.until) {
		return false, false
	}
	b.trial = true
	return true, true
}

// done records a call's outcome; err is its error, if any.
func (b *breaker) done(o outcome, trial bool, err error) {
	if o == abandoned {
		if trial {
			b.mu.Lock()
			b.trial = false
			b.mu.Unlock()
		}
		return
	}
	calls := b.calls.Add(1)
	if o == succeeded && !trial {
		if b.slow.Load() {
			b.refreshSlow(b.set.now())
		}
		return
	}
	t := b.set.now()
	switch o {
	case failed:
		b.failures.Add(1)
		b.win.count(t, o, calls)
	case timedOut:
		b.slowCalls.Add(1)
		b.win.count(t, o, calls)
	}
	if trial {
		b.endTrial(t, o, err)
		return
	}
	b.mu.Lock()
	b.lastErr = err
	b.mu.Unlock()
	if o == failed {
		if calls, fails, _ := b.recent(t); fails >= minFailures && 2*fails >= calls {
			b.trip(t, fmt.Sprintf("%d of %d calls failed in the last %v; last error: %v", fails, calls, healthWindow, err))
			return
		}
	}
	if o == timedOut {
		b.refreshSlow(t)
		if b.lateTooLong(t) {
			return
		}
	}
	b.probe()
}

// lateTooLong opens the breaker, and reports true, once most calls have
// missed their deadline for persistLate: a node that answers, but too
// late for nearly every check, keeps each of them waiting out its deadline
// for an answer it then ignores; deciding by policy at once is better,
// until a trial call is on time again. A stall shorter than persistLate
// (a busy moment, a collection) never opens it this way.
func (b *breaker) lateTooLong(t time.Time) bool {
	calls, _, slow := b.recent(t)
	mostly := slow >= minSlow && 2*slow >= calls
	b.mu.Lock()
	switch {
	case !mostly:
		b.lateSince = time.Time{}
	case b.lateSince.IsZero():
		b.lateSince = t
	case t.Sub(b.lateSince) >= persistLate:
		b.lateSince = time.Time{}
		b.mu.Unlock()
		b.trip(t, fmt.Sprintf("most calls missed their deadline for %v: %d of %d in the last %v", persistLate, slow, calls, healthWindow))
		return true
	}
	b.mu.Unlock()
	return false
}

// endTrial closes the breaker after a trial that succeeded, or keeps it
// open for another OpenFor.
func (b *breaker) endTrial(t time.Time, o outcome, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
	if o != succeeded {
		b.until = t.Add(b.set.wait(b.set.openFor))
		if err != nil {
			b.lastErr = err
		}
		return
	}
	if !b.open.Load() {
		return
	}
	b.win.reset()
	b.open.Store(false)
	b.set.log.Info("redis node back: circuit breaker closed", "node", b.addr,
		"open_for", t.Sub(b.since).Round(time.Millisecond), "reason_it_opened", b.reason)
	b.since, b.reason = time.Time{}, ""
	b.slow.Store(false)
}

// trip opens the breaker for reason.
func (b *breaker) trip(t time.Time, reason string) {
	b.mu.Lock()
	if b.open.Load() {
		b.mu.Unlock()
		return
	}
	calls, fails, slow := b.recent(t)
	b.open.Store(true)
	b.opens++
	b.until = t.Add(b.set.wait(b.set.openFor))
	b.since, b.reason = t, reason
	b.slow.Store(false)
	b.mu.Unlock()
	b.set.log.Warn("redis node down: circuit breaker open; its keys decide by their on_store_error policy", "node", b.addr,
		"reason", reason, "calls", calls, "failures", fails, "slow", slow, "window", healthWindow)
	if b.set.opened != nil {
		b.set.opened(b)
	}
}

// refreshSlow updates whether the node is reported slow, and logs when
// that changes.
func (b *breaker) refreshSlow(t time.Time) {
	calls, _, slow := b.recent(t)
	now := slow >= minSlow && 100*slow >= calls
	if now == b.slow.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now == b.slow.Load() || b.open.Load() {
		return
	}
	b.slow.Store(now)
	if now {
		b.since = t
		b.reason = fmt.Sprintf("%d of %d calls missed their deadline in the last %v", slow, calls, healthWindow)
		b.set.log.Warn("redis node slow: replies come after the store's deadline; those checks decide by their on_store_error policy", "node", b.addr,
			"slow", slow, "calls", calls, "window", healthWindow)
		return
	}
	b.set.log.Info("redis node no longer slow", "node", b.addr, "slow_for", t.Sub(b.since).Round(time.Millisecond))
	b.since, b.reason = time.Time{}, ""
}

// probe starts a liveness probe of the node unless one is in flight or
// the breaker is open: a PING that must answer within ProbeTimeout.
func (b *breaker) probe() {
	b.mu.Lock()
	if b.probing || b.open.Load() || b.set.ping == nil || b.set.ctx.Err() != nil {
		b.mu.Unlock()
		return
	}
	b.probing = true
	b.set.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.set.wg.Done()
		ctx, cancel := context.WithTimeout(b.set.ctx, b.set.probeTimeout)
		err := b.set.ping(ctx, b)
		expired := ctx.Err() != nil
		cancel()
		b.mu.Lock()
		b.probing = false
		b.mu.Unlock()
		switch {
		case b.set.ctx.Err() != nil: // the store is closing
		case expired:
			b.trip(b.set.now(), fmt.Sprintf("no reply to a PING within %v", b.set.probeTimeout))
		case err != nil:
			b.trip(b.set.now(), fmt.Sprintf("PING failed: %v", err))
		}
	}()
}

// report is what b knows of its node.
func (b *breaker) report() NodeHealth {
	t := b.set.now()
	if b.slow.Load() {
		b.refreshSlow(t)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	nh := NodeHealth{
		Addr: b.addr, Breaker: BreakerClosed, Slow: b.slow.Load(), Since: b.since, Reason: b.reason,
		Calls: b.calls.Load(), Failures: b.failures.Load(), SlowN: b.slowCalls.Load(), Opens: b.opens, LastErr: b.lastErr,
	}
	switch {
	case !b.open.Load():
	case b.trial:
		nh.Breaker = BreakerHalfOpen
	default:
		nh.Breaker = BreakerOpen
	}
	return nh
}

// jittered returns a wait drawn uniformly from [d/2, 3d/2): d on
// average, spread so that clients that failed together retry apart.
func jittered(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d)
}
