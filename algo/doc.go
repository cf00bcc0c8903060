// Package algo holds Bouncer's rate-limit algorithms as pure functions of
// (limit, state, now, cost) → (state, result): no locks, no I/O, no clock.
// Times are int64 nanoseconds since the Unix epoch, durations int64
// nanoseconds, so that no float drifts and every store (memory, Lua in
// Redis) can compute the same numbers. A limit counts them in whole ticks,
// nanoseconds or, for a limit whose state reaches Fine or more from now,
// microseconds (Params.Tick), so that every number a check forms stays
// below 2⁵³ ticks and a store computing in doubles gets the same integers.
//
// Every function assumes a limit that passed bouncer.Limit.Validate and a
// cost in [0, bouncer.MaxRate]; on other input it returns some result
// without panicking. A zero State is a fresh key for every algorithm.
//
// Check never modifies the entries that the State it was given sees, so a
// store may compute a check, discard the new state when another limit of
// the same request denies, and keep the old one. Refund may modify them.
package algo

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// State is the stored state of one limit on one key. What each field means
// depends on the algorithm; each algorithm's file says. The O(1)
// algorithms use T alone, but for a sliding window counter with very many
// units per period (see Params.OneWord).
type State struct {
	// T is an instant in Unix nanoseconds, possibly carrying a count (see
	// FixedWindow).
	T int64
	// N is the previous window's count (SlidingWindowCounter).
	N int64
	// Log holds admitted units (SlidingWindowLog) or leases (Concurrency),
	// ordered by At.
	Log []Entry
}

// Entry is N units at instant At: when they were admitted (sliding log) or
// when their lease expires (concurrency).
type Entry struct {
	At int64
	N  int64
}

// Result is one limit's answer to one check. See bouncer.Decision for what
// each field means.
type Result struct {
	Allowed    bool
	Remaining  int64
	ResetAfter time.Duration
	RetryAfter time.Duration
	Delay      time.Duration
}

// OneWord reports whether the algorithm's whole state is always State.T,
// so that a store can keep one int64 per key and use Params.CheckWord. A
// sliding window counter's state is one word for most limits: see
// Params.OneWord.
func OneWord(a bouncer.Algorithm) bool {
	switch a {
	case bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket, bouncer.FixedWindow:
		return true
	}
	return false
}

// Check decides a check of cost units at now under l, and returns the state
// to store if the check is allowed. A denied check charges nothing: the
// state it returns decides exactly as s (the log algorithms may have
// dropped entries that have aged out) — unless l.ChargeDenied, when a
// denied check returns the state charged with its cost (see FixedWindow
// and SlidingWindowCounter), which a store keeps whether this limit or
// another limit of the same check denied. A check of cost 0 charges
// nothing under any limit. It is shorthand for
// Prepare(l).Check(s, now, cost).
func Check(l bouncer.Limit, s State, now, cost int64) (State, Result) {
	p := Prepare(l)
	return p.Check(s, now, cost)
}

// Refund gives n units back to l's state at now. It never raises the limit
// above its capacity: what was not charged is not given back. It is
// shorthand for Prepare(l).Refund(s, now, n).
func Refund(l bouncer.Limit, s State, now, n int64) State {
	p := Prepare(l)
	return p.Refund(s, now, n)
}

// Expiry returns the instant from which s is the same as a fresh state, so
// that a store can forget it: every key's TTL. It is shorthand for
// Prepare(l).Expiry(s).
func Expiry(l bouncer.Limit, s State) int64 {
	p := Prepare(l)
	return p.Expiry(s)
}

// never is the result of a cost above the limit's capacity.
func never(remaining int64, reset int64) Result {
	return Result{Remaining: max(remaining, 0), ResetAfter: time.Duration(max(reset, 0)), RetryAfter: bouncer.Never}
}
