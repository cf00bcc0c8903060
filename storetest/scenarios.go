package storetest

import (
	"fmt"
	"time"

	"github.com/bouncerhq/bouncer"
)

// Scenario is one limit on one fresh key and a sequence of steps with the
// decision each check must get. The tables are written by hand from the
// formulas in package algo's doc comments; they are the shared definition
// of behaviour for the algorithm tests, every store's conformance run and
// the fuzz seeds.
type Scenario struct {
	Name  string
	Limit bouncer.Limit
	Steps []Step
}

// Step is one check, or one refund, at an instant of a Scenario.
type Step struct {
	// At is the offset from Start; it never decreases within a scenario.
	At time.Duration
	// Cost is the check's cost, or the units a refund gives back.
	Cost int64
	// Refund makes the step a Refund of Cost rather than a check; Want is
	// then unused.
	Refund bool
	// Charge makes the step a charge of Cost (store.Charger) rather
	// than a check, past the limit if need be; Want is then unused.
	Charge bool
	// Want is the check's expected decision for the scenario's limit.
	Want Want
}

// Want is what a check on a single limit must decide: the fields of
// bouncer.Decision that the algorithm computes.
type Want struct {
	Allowed    bool
	Remaining  int64
	ResetAfter time.Duration
	RetryAfter time.Duration
	Delay      time.Duration
}

// WantOf returns the part of d that a Want describes.
func WantOf(d bouncer.Decision) Want {
	return Want{Allowed: d.Allowed, Remaining: d.Remaining, ResetAfter: d.ResetAfter, RetryAfter: d.RetryAfter, Delay: d.Delay}
}

// String formats w on one line, with bouncer.Never spelled "never".
func (w Want) String() string {
	retry := w.RetryAfter.String()
	if w.RetryAfter == bouncer.Never {
		retry = "never"
	}
	return fmt.Sprintf("{allowed %t, remaining %d, reset %v, retry %s, delay %v}", w.Allowed, w.Remaining, w.ResetAfter, retry, w.Delay)
}

const (
	ns = time.Nanosecond
	ms = time.Millisecond
	s  = time.Second
)

// Step constructors keep the tables to one line per step.
func allow(at time.Duration, cost, remaining int64, reset time.Duration) Step {
	return Step{At: at, Cost: cost, Want: Want{Allowed: true, Remaining: remaining, ResetAfter: reset}}
}

func delayed(at time.Duration, cost, remaining int64, reset, delay time.Duration) Step {
	return Step{At: at, Cost: cost, Want: Want{Allowed: true, Remaining: remaining, ResetAfter: reset, Delay: delay}}
}

func deny(at time.Duration, cost, remaining int64, reset, retry time.Duration) Step {
	return Step{At: at, Cost: cost, Want: Want{Remaining: remaining, ResetAfter: reset, RetryAfter: retry}}
}

func refund(at time.Duration, n int64) Step { return Step{At: at, Cost: n, Refund: true} }

func charge(at time.Duration, n int64) Step { return Step{At: at, Cost: n, Charge: true} }

// Scenarios returns every scenario, a new slice each call, named
// "<algorithm>/<what>".
func Scenarios() []Scenario {
	var all []Scenario
	// GCRA and the policing leaky bucket decide exactly as the token
	// bucket: the same tables, another algorithm.
	for _, a := range []bouncer.Algorithm{bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket} {
		all = append(all, bucketScenarios(a)...)
	}
	all = append(all, shapeScenarios()...)
	all = append(all, fixedWindowScenarios()...)
	all = append(all, calendarScenarios()...)
	all = append(all, slidingLogScenarios()...)
	all = append(all, slidingCounterScenarios()...)
	all = append(all, concurrencyScenarios()...)
	return append(all, debtScenarios()...)
}

func bucketScenarios(a bouncer.Algorithm) []Scenario {
	// 10/s, burst 5: one token per 100ms, full after 500ms.
	l := bouncer.Limit{Name: "bucket", Algorithm: a, Rate: 10, Period: s, Burst: 5}
	// 3/s, burst 1: the interval rounds up to 333333334ns, so that no more
	// than 3 pass in any second.
	third := bouncer.Limit{Name: "third", Algorithm: a, Rate: 3, Period: s, Burst: 1}
	const i3 = 333333334 * ns
	// 2 per 60 days and a nanosecond, burst 2: a span of 2^51 ns or more
	// counts in microseconds (docs/redis.md): the interval rounds up to
	// 30 days and a microsecond, and every instant down to a microsecond.
	const month = 30 * 24 * time.Hour
	long := bouncer.Limit{Name: "long", Algorithm: a, Rate: 2, Period: 2*month + ns, Burst: 2}
	const iLong = month + time.Microsecond
	return []Scenario{
		{Name: a.String() + "/long_span_in_microseconds", Limit: long, Steps: []Step{
			allow(0, 1, 1, iLong),
			allow(1500*ns, 1, 0, 2*iLong-time.Microsecond),
			deny(1999*ns, 1, 0, 2*iLong-time.Microsecond, iLong-time.Microsecond),
			refund(2*time.Microsecond, 1),
			allow(2*time.Microsecond, 0, 1, iLong-2*time.Microsecond),
		}},
		{Name: a.String() + "/burst_then_refill", Limit: l, Steps: []Step{
			allow(0, 1, 4, 100*ms),
			allow(0, 4, 0, 500*ms),
			deny(0, 1, 0, 500*ms, 100*ms),
			allow(100*ms, 1, 0, 500*ms),
			deny(150*ms, 1, 0, 450*ms, 50*ms),
			allow(150*ms, 0, 0, 450*ms),
			allow(350*ms, 2, 0, 450*ms), // 2.5 tokens refilled: 2 taken, half a token left
			allow(1100*ms, 0, 5, 0),
			deny(1100*ms, 6, 5, 0, bouncer.Never),
			allow(1100*ms, 5, 0, 500*ms),
			deny(1100*ms, 6, 0, 500*ms, bouncer.Never),
		}},
		{Name: a.String() + "/refund", Limit: l, Steps: []Step{
			refund(0, 3), // a fresh bucket is full: nothing to give back
			allow(0, 1, 4, 100*ms),
			allow(0, 3, 1, 400*ms),
			refund(0, 2),
			allow(0, 0, 3, 200*ms),
			refund(100*ms, 10), // 4 tokens: only one more fits
			allow(100*ms, 0, 5, 0),
			allow(100*ms, 5, 0, 500*ms),
		}},
		{Name: a.String() + "/interval_rounds_up", Limit: third, Steps: []Step{
			allow(0, 1, 0, i3),
			deny(i3-ns, 1, 0, ns, ns),
			allow(i3, 1, 0, i3),
			allow(2*i3, 1, 0, i3),
			deny(s, 1, 0, 2*ns, 2*ns), // a fourth unit at 1s would make 4 in [0, 1s]
			allow(3*i3, 1, 0, i3),
		}},
	}
}

func shapeScenarios() []Scenario {
	// 10/s, queue 3 deep: a unit drains every 100ms.
	l := bouncer.Limit{Name: "shape", Algorithm: bouncer.LeakyBucket, Rate: 10, Period: s, Burst: 3, Shape: true}
	one := bouncer.Limit{Name: "shape1", Algorithm: bouncer.LeakyBucket, Rate: 2, Period: s, Burst: 1, Shape: true}
	return []Scenario{
		{Name: "leaky_bucket/shape", Limit: l, Steps: []Step{
			delayed(0, 1, 2, 100*ms, 0),
			delayed(0, 1, 1, 200*ms, 100*ms),
			delayed(0, 1, 0, 300*ms, 200*ms),
			deny(0, 1, 0, 300*ms, 100*ms),
			deny(50*ms, 1, 0, 250*ms, 50*ms),
			delayed(100*ms, 1, 0, 300*ms, 200*ms),
			delayed(100*ms, 0, 0, 300*ms, 0), // a peek waits for nothing
			delayed(1*s, 2, 1, 200*ms, 0),
			delayed(1*s, 1, 0, 300*ms, 200*ms),
			deny(1*s, 4, 0, 300*ms, bouncer.Never),
			refund(1*s, 1),
			delayed(1*s, 1, 0, 300*ms, 200*ms),
		}},
		{Name: "leaky_bucket/shape_burst_1", Limit: one, Steps: []Step{
			delayed(0, 1, 0, 500*ms, 0),
			deny(200*ms, 1, 0, 300*ms, 300*ms), // Burst 1 queues nothing
			delayed(500*ms, 1, 0, 500*ms, 0),
		}},
	}
}

func fixedWindowScenarios() []Scenario {
	l := bouncer.Limit{Name: "window", Algorithm: bouncer.FixedWindow, Rate: 3, Period: s}
	charged := bouncer.Limit{Name: "charged", Algorithm: bouncer.FixedWindow, Rate: 10, Period: s, ChargeDenied: true}
	return []Scenario{
		{Name: "fixed_window/window_resets", Limit: l, Steps: []Step{
			refund(0, 2),
			allow(0, 0, 3, 0), // nothing counted: nothing to reset
			allow(100*ms, 2, 1, 900*ms),
			allow(900*ms, 1, 0, 100*ms),
			deny(999*ms, 1, 0, ms, ms),
			allow(1*s, 1, 2, 1*s),
			refund(1500*ms, 1),
			allow(1500*ms, 0, 3, 0),
			deny(1500*ms, 4, 3, 0, bouncer.Never),
			allow(1500*ms, 3, 0, 500*ms),
			deny(1500*ms, 4, 0, 500*ms, bouncer.Never),
		}},
		{Name: "fixed_window/double_burst_at_boundary", Limit: l, Steps: []Step{
			allow(999*ms, 3, 0, ms),
			deny(999*ms, 1, 0, ms, ms),
			allow(1*s, 3, 0, 1*s), // six units within 1ms: the documented 2×
			deny(1*s, 1, 0, 1*s, 1*s),
		}},
		// envoyproxy/ratelimit's counting: every check is charged, and a
		// window whose count passed the rate denies everything until it
		// resets. The count saturates at Rate+1.
		{Name: "fixed_window/charge_denied", Limit: charged, Steps: []Step{
			allow(0, 8, 2, 1*s),
			deny(100*ms, 5, 0, 900*ms, 900*ms), // 13 > 10: denied and charged, over
			deny(200*ms, 1, 0, 800*ms, 800*ms), // over: 1 more is denied
			deny(300*ms, 0, 0, 700*ms, 700*ms), // and so is a peek
			deny(400*ms, 11, 0, 600*ms, bouncer.Never),
			allow(1*s, 0, 10, 0), // the next window is fresh
			allow(1*s, 10, 0, 1*s),
			allow(1100*ms, 0, 0, 900*ms), // exactly at the rate: not over
			deny(1100*ms, 1, 0, 900*ms, 900*ms),
			refund(1200*ms, 3), // from the saturated count, 11
			allow(1200*ms, 0, 2, 800*ms),
			allow(1200*ms, 2, 0, 800*ms),
			deny(2*s, 11, 0, 1*s, bouncer.Never), // above the rate, charged even on a fresh window
			deny(2*s, 0, 0, 1*s, 1*s),
			refund(2500*ms, 20),
			allow(2500*ms, 0, 10, 0),
		}},
	}
}

func slidingLogScenarios() []Scenario {
	l := bouncer.Limit{Name: "log", Algorithm: bouncer.SlidingWindowLog, Rate: 3, Period: s}
	return []Scenario{
		{Name: "sliding_window_log/entries_leave", Limit: l, Steps: []Step{
			allow(0, 1, 2, 1*s),
			allow(400*ms, 2, 0, 1*s),
			deny(999*ms, 1, 0, 401*ms, ms),
			allow(1*s, 1, 0, 1*s), // the unit of 0 left the window (1s−P, 1s]
			deny(1*s, 1, 0, 1*s, 400*ms),
			allow(1400*ms, 2, 0, 1*s),
			allow(1400*ms, 0, 0, 1*s),
			deny(1400*ms, 4, 0, 1*s, bouncer.Never),
			refund(1400*ms, 1), // gives back the newest unit
			allow(1400*ms, 0, 1, 1*s),
			allow(2400*ms, 0, 3, 0),
		}},
		{Name: "sliding_window_log/never_more_than_rate", Limit: l, Steps: []Step{
			allow(999*ms, 3, 0, 1*s),
			deny(1*s, 1, 0, 999*ms, 999*ms), // where a fixed window admits 3 more
			deny(1998*ms, 1, 0, ms, ms),
			allow(1999*ms, 3, 0, 1*s),
		}},
	}
}

func slidingCounterScenarios() []Scenario {
	l := bouncer.Limit{Name: "counter", Algorithm: bouncer.SlidingWindowCounter, Rate: 10, Period: s}
	four := bouncer.Limit{Name: "counter4", Algorithm: bouncer.SlidingWindowCounter, Rate: 4, Period: s}
	charged := bouncer.Limit{Name: "charged", Algorithm: bouncer.SlidingWindowCounter, Rate: 4, Period: s, ChargeDenied: true}
	return []Scenario{
		{Name: "sliding_window_counter/weighted", Limit: l, Steps: []Step{
			allow(0, 5, 5, 2*s),
			allow(500*ms, 5, 0, 1500*ms),
			// Retry when ⌈10×(1s−e)/1s⌉ + 1 ≤ 10 in the next window: e = 100ms.
			deny(600*ms, 1, 0, 1400*ms, 500*ms),
			allow(1100*ms, 1, 0, 1900*ms),
			allow(1500*ms, 0, 4, 1500*ms),
			allow(1550*ms, 0, 4, 1450*ms), // ⌈10×0.45⌉ = 5: rounded up
			deny(1550*ms, 5, 4, 1450*ms, 50*ms),
			allow(1600*ms, 5, 0, 1400*ms),
			allow(2500*ms, 0, 7, 500*ms), // ⌈6×0.5⌉ = 3
			deny(2500*ms, 11, 7, 500*ms, bouncer.Never),
			refund(2500*ms, 2), // the current window is empty: from the previous one
			allow(2500*ms, 0, 8, 500*ms),
			allow(3500*ms, 0, 10, 0),
		}},
		{Name: "sliding_window_counter/retry_in_next_window", Limit: four, Steps: []Step{
			allow(0, 4, 0, 2*s),
			deny(0, 1, 0, 2*s, 1250*ms), // ⌈4×0.75⌉ + 1 = 4 at 1.25s
			deny(0, 4, 0, 2*s, 2*s),     // room for 4 only once the count is gone
			deny(1250*ms-ns, 1, 0, 750*ms+ns, ns),
			allow(1250*ms, 1, 0, 1750*ms),
		}},
		{Name: "sliding_window_counter/refund_both_windows", Limit: four, Steps: []Step{
			allow(0, 4, 0, 2*s),
			allow(1500*ms, 2, 0, 1500*ms), // ⌈4×0.5⌉ + 2 = 4
			refund(1500*ms, 6),            // more than capacity: 6 were charged
			allow(1500*ms, 0, 4, 0),
		}},
		// Denied checks are charged to the current window, up to Rate+1,
		// which then weighs in the next window like any count.
		{Name: "sliding_window_counter/charge_denied", Limit: charged, Steps: []Step{
			allow(0, 3, 1, 2*s),
			deny(0, 2, 0, 2*s, 1600*ms),          // 5, over; ⌈5×0.4⌉ + 2 = 4 at 1.6s
			deny(500*ms, 0, 0, 1500*ms, 700*ms),  // a peek over: ⌈5×0.8⌉ = 4 at 1.2s
			deny(1*s, 0, 0, 1*s, 200*ms),         // the previous window weighs 5
			allow(1200*ms, 0, 0, 800*ms),         // ⌈5×0.8⌉ = 4
			deny(1200*ms, 1, 0, 1800*ms, 400*ms), // charged: ⌈5×0.4⌉ + 1 + 1 = 4 at 1.6s
			allow(1600*ms, 1, 0, 1400*ms),
			deny(1600*ms, 5, 0, 1400*ms, bouncer.Never), // charged up to 5
			deny(2*s, 0, 0, 1*s, 200*ms),
			refund(2*s, 3), // the current window is empty: from the previous one, 5
			allow(2*s, 0, 2, 1*s),
			allow(3*s, 0, 4, 0),
		}},
	}
}

func concurrencyScenarios() []Scenario {
	l := bouncer.Limit{Name: "inflight", Algorithm: bouncer.Concurrency, Rate: 2, Period: 10 * s}
	return []Scenario{
		{Name: "concurrency/leases", Limit: l, Steps: []Step{
			allow(0, 1, 1, 10*s),
			allow(1*s, 1, 0, 10*s),
			deny(2*s, 1, 0, 9*s, 8*s),
			refund(3*s, 1), // releases the oldest lease, the one of 0
			allow(3*s, 1, 0, 10*s),
			deny(3*s, 3, 0, 10*s, bouncer.Never),
			allow(11*s, 0, 1, 2*s), // the lease of 1s expired
			allow(13*s, 0, 2, 0),
			refund(13*s, 1),
			allow(13*s, 2, 0, 10*s),
			refund(14*s, 5),
			allow(14*s, 0, 2, 0),
		}},
		{Name: "concurrency/partial_release", Limit: l, Steps: []Step{
			allow(0, 2, 0, 10*s),
			refund(1*s, 1),
			allow(1*s, 1, 0, 10*s),
			deny(1*s, 1, 0, 10*s, 9*s),
			allow(10*s, 1, 0, 10*s),
		}},
	}
}
