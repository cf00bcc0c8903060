package simulate

import (
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
)

// clock is the virtual clock of a simulation: rows of step from the Unix
// instant start until start + duration. Nothing reads the real clock.
type clock struct {
	start    int64 // Unix nanoseconds
	duration time.Duration
	step     time.Duration
}

// row is one step of a simulation's table.
type row struct {
	at time.Duration // the row's start, from the simulation's start
	// before is the state at the row's start, after the leases due by then
	// were released; after is the state right after the row's last
	// request (before, if the row has none). See stateOf.
	before, after int64
	requests      int64 // requests that arrived in the row
	admitted      int64
	rejected      int64
	maxDelay      time.Duration // the longest Delay of an admitted request
	// offeredUnits and admittedUnits are the costs of the row's requests
	// and of those admitted: what a limit counts, and the chart draws.
	offeredUnits, admittedUnits int64
}

// outcome is one limit's run over a traffic pattern.
type outcome struct {
	limit bouncer.Limit
	rows  []row

	requests, admitted, rejected int64
	// maxInWindow is the most units admitted within any span of one
	// Period: [t, t+Period) for every t.
	maxInWindow int64
	maxDelay    time.Duration
	// never reports that some request cost more than the limit's capacity,
	// so that it was denied with RetryAfter Never.
	never bool
}

// simulate runs traffic (sorted by time) through l on one key's state,
// calling the algorithm's Check for every request exactly as a store does
// (through algo.Prepare, as the stores do; algo.Check is shorthand for the
// same). For Concurrency, every admitted request releases its units with
// Refund hold after it was admitted; hold is unused for the other
// algorithms.
func simulate(l bouncer.Limit, traffic []arrival, c clock, hold time.Duration) outcome {
	p := algo.Prepare(l)
	var (
		s        algo.State
		releases []arrival // admitted concurrency requests, by release time
		admitted []arrival
	)
	o := outcome{limit: l}
	now := func(at time.Duration) int64 { return c.start + int64(at) }
	releaseThrough := func(t time.Duration) {
		for len(releases) > 0 && releases[0].at <= t {
			r := releases[0]
			releases = releases[1:]
			s = p.Refund(s, now(r.at), r.cost)
		}
	}
	next := 0
	for at := time.Duration(0); at < c.duration; at += c.step {
		end := min(at+c.step, c.duration)
		releaseThrough(at)
		_, peek := p.Check(s, now(at), 0)
		r := row{at: at, before: stateOf(l, peek), after: stateOf(l, peek)}
		for ; next < len(traffic) && traffic[next].at < end; next++ {
			a := traffic[next]
			releaseThrough(a.at)
			ns, res := p.Check(s, now(a.at), a.cost)
			r.requests++
			r.offeredUnits += a.cost
			if res.Allowed {
				s = ns
				r.admitted++
				r.admittedUnits += a.cost
				r.maxDelay = max(r.maxDelay, res.Delay)
				admitted = append(admitted, a)
				if l.Algorithm == bouncer.Concurrency && a.cost > 0 {
					releases = append(releases, arrival{at: a.at + hold, cost: a.cost})
				}
			} else {
				r.rejected++
				o.never = o.never || res.RetryAfter == bouncer.Never
			}
			// An allowed result's Remaining is after its charge, a
			// denied one's is the current state: either way, the state
			// now.
			r.after = stateOf(l, res)
		}
		o.requests += r.requests
		o.admitted += r.admitted
		o.rejected += r.rejected
		o.maxDelay = max(o.maxDelay, r.maxDelay)
		o.rows = append(o.rows, r)
	}
	o.maxInWindow = maxInWindow(admitted, l.Period)
	return o
}

// stateOf returns what the table shows of a limit's state, from a result:
// the tokens left for a token bucket or GCRA (Remaining), and for the
// others the units taken (Capacity − Remaining): the leaky bucket's level,
// a window's count, the sliding counter's weighted estimate, the log's
// units in the window, the units in flight.
func stateOf(l bouncer.Limit, r algo.Result) int64 {
	switch l.Algorithm {
	case bouncer.TokenBucket, bouncer.GCRA:
		return r.Remaining
	}
	return l.Capacity() - r.Remaining
}

// stateName names stateOf's number for l's algorithm.
func stateName(a bouncer.Algorithm) string {
	switch a {
	case bouncer.TokenBucket, bouncer.GCRA:
		return "tokens"
	case bouncer.LeakyBucket:
		return "level"
	case bouncer.FixedWindow:
		return "count"
	case bouncer.SlidingWindowCounter:
		return "estimate"
	case bouncer.SlidingWindowLog:
		return "in window"
	case bouncer.Concurrency:
		return "in flight"
	}
	return "state"
}

// maxInWindow returns the most units of admitted (sorted by time) within
// any span [t, t+period). Such a span holding the most starts at an
// admission, so only those starts are tried.
func maxInWindow(admitted []arrival, period time.Duration) int64 {
	var best, sum int64
	j := 0
	for i, a := range admitted {
		for ; j < len(admitted) && admitted[j].at-a.at < period; j++ {
			sum += admitted[j].cost
		}
		best = max(best, sum)
		sum -= admitted[i].cost
	}
	return best
}
