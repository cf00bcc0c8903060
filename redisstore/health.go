package redisstore

import (
	"fmt"
	"strings"
	"time"
)

// Health is what a store knows of Redis: whether it has connected, its
// counts, and each node's breaker and counts.
type Health struct {
	Connected    bool         // false until the store first connects
	ConnectError error        // while not connected: why the last attempt failed
	SetupError   error        // why the store, connected, cannot decide in Redis: a permission its user lacks, a server without functions (found when it connects; nil once a call succeeds)
	Calls        uint64       // checks, refunds, resets and exchanges of shares sent to Redis (a batched call of n checks counts n; an exchange, one)
	Failures     uint64       // calls that ended in an error
	SlowN        uint64       // calls that missed their deadline
	DegradedN    uint64       // checks decided by policy without Redis (Decision.Degraded)
	LastErr      error        // the last failure or missed deadline, or nil
	Nodes        []NodeHealth // the nodes calls went to, in the order the store met them
}

// Degraded returns why checks may be decided without Redis now, one
// reason per line ("" entries never), or nil when nothing is wrong: the
// store is not connected, its Redis user lacks a permission (SetupError),
// a node's breaker is open, or a node is slow.
func (h Health) Degraded() []string {
	var out []string
	if !h.Connected {
		msg := "redis: not connected yet"
		if h.ConnectError != nil {
			msg = h.ConnectError.Error()
		}
		out = append(out, msg)
	}
	if h.SetupError != nil {
		out = append(out, strings.Split(h.SetupError.Error(), "\n")...)
	}
	for _, n := range h.Nodes {
		name := n.Addr
		if name == "" {
			name = "unmapped slots"
		}
		switch {
		case n.Breaker != BreakerClosed:
			out = append(out, fmt.Sprintf("redis node %s: circuit breaker %s since %s: %s", name, n.Breaker, n.Since.Format(time.RFC3339), n.Reason))
		case n.Slow:
			out = append(out, fmt.Sprintf("redis node %s: slow since %s: %s", name, n.Since.Format(time.RFC3339), n.Reason))
		}
	}
	return out
}

// Health returns what the store knows of Redis now. It is cheap enough to
// call on every readiness probe or metrics scrape.
func (s *Store) Health() Health {
	h := Health{
		Connected: s.ready.Load(),
		Calls:     s.calls.Load(), Failures: s.failures.Load(), SlowN: s.slow.Load(),
		DegradedN: s.degraded.Load(),
	}
	if e := s.lastErr.Load(); e != nil {
		h.LastErr = *e
	}
	if e := s.setupErr.Load(); e != nil {
		h.SetupError = *e
	}
	if !h.Connected {
		h.ConnectError = s.errConnecting()
		return h
	}
	for _, b := range s.breakers.all() {
		h.Nodes = append(h.Nodes, b.report())
	}
	return h
}

// NodeHealth is what a store knows of one Redis node.
type NodeHealth struct {
	Addr     string    // host:port; "" for a Cluster's slots that no known master serves
	Breaker  string    // BreakerClosed, BreakerOpen or BreakerHalfOpen
	Slow     bool      // at least 10 calls of the last 10 s missed their deadline, and 1 % of those since the first
	Since    time.Time // open, or slow, since then
	Reason   string    // why it is open or slow
	Calls    uint64    // checks, refunds and exchanges of shares sent to it (a batch of n checks counts n; an exchange that reached it, one)
	Failures uint64    // calls that ended in an error
	SlowN    uint64    // calls that missed their deadline
	Opens    uint64    // times its breaker opened
	LastErr  error     // the last failure or missed deadline, or nil
}
