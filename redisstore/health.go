package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Health. A store keeps one circuit breaker per Redis node: one for a
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
// An open breaker keeps calls from its node for OpenFor; then one call
// goes through as a trial: its success closes the breaker, its failure
// keeps it open for another OpenFor.
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
	// before it lets one through as a trial; 0 means DefaultOpenFor.
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

// health is what the store's nodes share: options, clock, logger, and the
// probes in flight.
type health struct {
	probeTimeout time.Duration
	openFor      time.Duration
	now          func() time.Time
	log          *slog.Logger

	// ping probes a node; opened is told when a breaker opens (a
	// Cluster's map of slots may have changed).
	ping   func(ctx context.Context, n *node) error
	opened func(n *node)

	ctx    context.Context // canceled by close: probes stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newHealth(o BreakerOptions, now func() time.Time, log *slog.Logger) *health {
	h := &health{probeTimeout: o.ProbeTimeout, openFor: o.OpenFor, now: now, log: log}
	if h.probeTimeout <= 0 {
		h.probeTimeout = DefaultProbeTimeout
	}
	if h.openFor <= 0 {
		h.openFor = DefaultOpenFor
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// close stops the probes in flight and waits for them.
func (h *health) close() {
	h.cancel()
	h.wg.Wait()
}

// node is one Redis node's breaker and counts. While closed, a call costs
// it one atomic load before and a few atomic adds after.
type node struct {
	addr string
	h    *health

	open atomic.Bool // open or half-open
	slow atomic.Bool // reported slow (see refreshSlow)

	calls, failures, slowCalls atomic.Uint64 // since the store started
	win                        [windowBuckets]bucket

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

// bucket counts the failures and slow calls of one healthWindow/
// windowBuckets of a node's, and the node's calls before its first. Its
// counts are approximate: an event that races the bucket's reset may be
// lost, which the rates it feeds can afford. A call that succeeds touches
// no bucket: the healthy path costs an atomic add.
type bucket struct {
	slot            atomic.Int64 // which span of time it counts (see span)
	before          atomic.Uint64
	failures, slowN atomic.Uint32
}

func newNode(addr string, h *health) *node {
	n := &node{addr: addr, h: h}
	n.resetWindow()
	return n
}

// span is the index of the bucket span t falls in, counted from the Unix
// epoch (so that any clock a test pins is after its start).
func span(t time.Time) int64 {
	return t.UnixNano() / int64(healthWindow/windowBuckets)
}

// count records a failure or a slow call at t, the calls'th.
func (n *node) count(t time.Time, o outcome, calls uint64) {
	s := span(t)
	b := &n.win[s%windowBuckets]
	if old := b.slot.Load(); old != s && b.slot.CompareAndSwap(old, s) {
		b.before.Store(calls - 1)
		b.failures.Store(0)
		b.slowN.Store(0)
	}
	switch o {
	case failed:
		b.failures.Add(1)
	case timedOut:
		b.slowN.Add(1)
	}
}

// window sums the failures and slow calls of the last healthWindow before
// t, and counts the calls made since the first of them.
func (n *node) window(t time.Time) (calls, failures, slow uint64) {
	s := span(t)
	total := n.calls.Load()
	first := total
	for i := range n.win {
		b := &n.win[i]
		if age := s - b.slot.Load(); age >= 0 && age < windowBuckets {
			failures += uint64(b.failures.Load())
			slow += uint64(b.slowN.Load())
			first = min(first, b.before.Load())
		}
	}
	return total - first, failures, slow
}

func (n *node) resetWindow() {
	for i := range n.win {
		n.win[i].slot.Store(-2 * windowBuckets)
	}
}

// allow reports whether a call may go to the node, and whether it is the
// trial of an open breaker (which must report with done).
func (n *node) allow() (ok, trial bool) {
	if !n.open.Load() {
		return true, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.open.Load() {
		return true, false
	}
	if n.trial || n.h.now().Before(n.until) {
		return false, false
	}
	n.trial = true
	return true, true
}

// done records a call's outcome; err is its error, if any.
func (n *node) done(o outcome, trial bool, err error) {
	if o == abandoned {
		if trial {
			n.mu.Lock()
			n.trial = false
			n.mu.Unlock()
		}
		return
	}
	calls := n.calls.Add(1)
	if o == succeeded && !trial {
		if n.slow.Load() {
			n.refreshSlow(n.h.now())
		}
		return
	}
	t := n.h.now()
	switch o {
	case failed:
		n.failures.Add(1)
		n.count(t, o, calls)
	case timedOut:
		n.slowCalls.Add(1)
		n.count(t, o, calls)
	}
	if trial {
		n.endTrial(t, o, err)
		return
	}
	n.mu.Lock()
	n.lastErr = err
	n.mu.Unlock()
	if o == failed {
		if calls, fails, _ := n.window(t); fails >= minFailures && 2*fails >= calls {
			n.trip(t, fmt.Sprintf("%d of %d calls failed in the last %v; last error: %v", fails, calls, healthWindow, err))
			return
		}
	}
	if o == timedOut {
		n.refreshSlow(t)
		if n.lateTooLong(t) {
			return
		}
	}
	n.probe()
}

// lateTooLong opens the breaker, and reports true, once most calls have
// missed their deadline for persistLate: a node that answers, but too
// late for nearly every check, keeps each of them waiting out its deadline
// for an answer it then ignores; deciding by policy at once is better,
// until a trial call is on time again. A stall shorter than persistLate
// (a busy moment, a collection) never opens it this way.
func (n *node) lateTooLong(t time.Time) bool {
	calls, _, slow := n.window(t)
	mostly := slow >= minSlow && 2*slow >= calls
	n.mu.Lock()
	switch {
	case !mostly:
		n.lateSince = time.Time{}
	case n.lateSince.IsZero():
		n.lateSince = t
	case t.Sub(n.lateSince) >= persistLate:
		n.lateSince = time.Time{}
		n.mu.Unlock()
		n.trip(t, fmt.Sprintf("most calls missed their deadline for %v: %d of %d in the last %v", persistLate, slow, calls, healthWindow))
		return true
	}
	n.mu.Unlock()
	return false
}

// endTrial closes the breaker after a trial that succeeded, or keeps it
// open for another OpenFor.
func (n *node) endTrial(t time.Time, o outcome, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.trial = false
	if o != succeeded {
		n.until = t.Add(n.h.openFor)
		if err != nil {
			n.lastErr = err
		}
		return
	}
	if !n.open.Load() {
		return
	}
	n.resetWindow()
	n.open.Store(false)
	n.h.log.Info("redis node back: circuit breaker closed", "node", n.addr,
		"open_for", t.Sub(n.since).Round(time.Millisecond), "reason_it_opened", n.reason)
	n.since, n.reason = time.Time{}, ""
	n.slow.Store(false)
}

// trip opens the breaker for reason.
func (n *node) trip(t time.Time, reason string) {
	n.mu.Lock()
	if n.open.Load() {
		n.mu.Unlock()
		return
	}
	calls, fails, slow := n.window(t)
	n.open.Store(true)
	n.opens++
	n.until = t.Add(n.h.openFor)
	n.since, n.reason = t, reason
	n.slow.Store(false)
	n.mu.Unlock()
	n.h.log.Warn("redis node down: circuit breaker open; its keys decide by their on_store_error policy", "node", n.addr,
		"reason", reason, "calls", calls, "failures", fails, "slow", slow, "window", healthWindow)
	if n.h.opened != nil {
		n.h.opened(n)
	}
}

// refreshSlow updates whether the node is reported slow, and logs when
// that changes.
func (n *node) refreshSlow(t time.Time) {
	calls, _, slow := n.window(t)
	now := slow >= minSlow && 100*slow >= calls
	if now == n.slow.Load() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if now == n.slow.Load() || n.open.Load() {
		return
	}
	n.slow.Store(now)
	if now {
		n.since = t
		n.reason = fmt.Sprintf("%d of %d calls missed their deadline in the last %v", slow, calls, healthWindow)
		n.h.log.Warn("redis node slow: replies come after the store's deadline; those checks decide by their on_store_error policy", "node", n.addr,
			"slow", slow, "calls", calls, "window", healthWindow)
		return
	}
	n.h.log.Info("redis node no longer slow", "node", n.addr, "slow_for", t.Sub(n.since).Round(time.Millisecond))
	n.since, n.reason = time.Time{}, ""
}

// probe starts a liveness probe of the node unless one is in flight or
// the breaker is open: a PING that must answer within ProbeTimeout.
func (n *node) probe() {
	n.mu.Lock()
	if n.probing || n.open.Load() || n.h.ping == nil || n.h.ctx.Err() != nil {
		n.mu.Unlock()
		return
	}
	n.probing = true
	n.h.wg.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.h.wg.Done()
		ctx, cancel := context.WithTimeout(n.h.ctx, n.h.probeTimeout)
		err := n.h.ping(ctx, n)
		expired := ctx.Err() != nil
		cancel()
		n.mu.Lock()
		n.probing = false
		n.mu.Unlock()
		switch {
		case n.h.ctx.Err() != nil: // the store is closing
		case expired:
			n.trip(n.h.now(), fmt.Sprintf("no reply to a PING within %v", n.h.probeTimeout))
		case err != nil:
			n.trip(n.h.now(), fmt.Sprintf("PING failed: %v", err))
		}
	}()
}

// NodeHealth is what a store knows of one Redis node.
type NodeHealth struct {
	Addr     string    // host:port; "" for a Cluster's slots that no known master serves
	Breaker  string    // BreakerClosed, BreakerOpen or BreakerHalfOpen
	Slow     bool      // at least 10 calls of the last 10 s missed their deadline, and 1 % of those since the first
	Since    time.Time // open, or slow, since then
	Reason   string    // why it is open or slow
	Calls    uint64    // checks and refunds sent to it (a batch of n counts n)
	Failures uint64    // calls that ended in an error
	SlowN    uint64    // calls that missed their deadline
	Opens    uint64    // times its breaker opened
	LastErr  error     // the last failure or missed deadline, or nil
}

func (n *node) health() NodeHealth {
	t := n.h.now()
	if n.slow.Load() {
		n.refreshSlow(t)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	nh := NodeHealth{
		Addr: n.addr, Breaker: BreakerClosed, Slow: n.slow.Load(), Since: n.since, Reason: n.reason,
		Calls: n.calls.Load(), Failures: n.failures.Load(), SlowN: n.slowCalls.Load(), Opens: n.opens, LastErr: n.lastErr,
	}
	switch {
	case !n.open.Load():
	case n.trial:
		nh.Breaker = BreakerHalfOpen
	default:
		nh.Breaker = BreakerOpen
	}
	return nh
}
