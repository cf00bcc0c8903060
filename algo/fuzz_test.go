package algo_test

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

func FuzzTokenBucket(f *testing.F) { fuzzAlgorithm(f, bouncer.TokenBucket, algo.TokenBucket) }
func FuzzGCRA(f *testing.F)        { fuzzAlgorithm(f, bouncer.GCRA, algo.GCRA) }
func FuzzLeakyBucket(f *testing.F) { fuzzAlgorithm(f, bouncer.LeakyBucket, algo.LeakyBucket) }
func FuzzFixedWindow(f *testing.F) { fuzzAlgorithm(f, bouncer.FixedWindow, algo.FixedWindow) }
func FuzzConcurrency(f *testing.F) { fuzzAlgorithm(f, bouncer.Concurrency, algo.Concurrency) }
func FuzzSlidingWindowLog(f *testing.F) {
	fuzzAlgorithm(f, bouncer.SlidingWindowLog, algo.SlidingWindowLog)
}
func FuzzSlidingWindowCounter(f *testing.F) {
	fuzzAlgorithm(f, bouncer.SlidingWindowCounter, algo.SlidingWindowCounter)
}

// fuzzStep is one decoded step: move the clock, then check, refund or
// charge.
type fuzzStep struct {
	advance uint64
	cost    int64
	refund  bool
	charge  bool
}

// Bounds that keep a decoded sequence cheap and its instants in int64.
const (
	maxFuzzSteps = 256
	maxFuzzTime  = 8 * int64(bouncer.MaxPeriod) // past Start
	maxLogUnits  = 4096                         // the log models keep one entry per unit
)

// encode writes a scenario in the format decode reads: uvarints for rate,
// period, burst and flags (1 = shape, 2 = charge denied), then for each
// step the advance since the last one, the cost and flags (1 = refund).
func encode(sc storetest.Scenario) []byte {
	l := sc.Limit
	var b []byte
	b = binary.AppendUvarint(b, uint64(l.Rate))
	b = binary.AppendUvarint(b, uint64(l.Period))
	b = binary.AppendUvarint(b, uint64(l.Burst))
	b = binary.AppendUvarint(b, flag(l.Shape)|flag(l.ChargeDenied)<<1)
	var last time.Duration
	for _, st := range sc.Steps {
		b = binary.AppendUvarint(b, uint64(st.At-last))
		b = binary.AppendUvarint(b, uint64(st.Cost))
		b = binary.AppendUvarint(b, flag(st.Refund)|flag(st.Charge)<<1)
		last = st.At
	}
	return b
}

func flag(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// decode reads a limit of algorithm a and its steps from data; fields
// past the end of data read as 0, and a step cut short ends the sequence.
// The limit may be invalid; costs and advances are raw.
func decode(a bouncer.Algorithm, data []byte) (bouncer.Limit, []fuzzStep) {
	next := func() (int64, bool) {
		v, n := binary.Uvarint(data)
		if n <= 0 {
			data = nil
			return 0, false
		}
		data = data[n:]
		return int64(v), true
	}
	l := bouncer.Limit{Name: "fuzz", Algorithm: a}
	l.Rate, _ = next()
	period, _ := next()
	l.Period = time.Duration(period)
	l.Burst, _ = next()
	flags, _ := next()
	l.Shape = flags&1 != 0
	l.ChargeDenied = flags&2 != 0
	var steps []fuzzStep
	for len(steps) < maxFuzzSteps {
		adv, ok1 := next()
		cost, ok2 := next()
		flags, ok3 := next()
		if !ok1 || !ok2 || !ok3 {
			break
		}
		steps = append(steps, fuzzStep{advance: uint64(adv), cost: cost, refund: flags&1 != 0, charge: flags&3 == 2})
	}
	return l, steps
}

type algorithmFunc func(bouncer.Limit, algo.State, int64, int64) (algo.State, algo.Result)

// fuzzAlgorithm fuzzes one algorithm, seeded with its scenarios: fn and
// algo.Check must agree with each other and with storetest's Model, keep
// the invariants every Result holds, and never panic, also on invalid
// limits.
func fuzzAlgorithm(f *testing.F, a bouncer.Algorithm, fn algorithmFunc) {
	for _, sc := range storetest.Scenarios() {
		if sc.Limit.Algorithm == a {
			f.Add(encode(sc))
		}
	}
	f.Add(encode(storetest.Scenario{Limit: bouncer.Limit{Algorithm: a, Rate: 0, Period: -1, Burst: -1}, Steps: []storetest.Step{{Cost: 1}, {Cost: 1, Refund: true}}}))
	// Every limit charging denied checks, valid or not.
	charging := []storetest.Step{{Cost: 3}, {Cost: 3}, {Cost: 0}, {At: 1, Cost: 7}, {At: 2, Cost: 2, Refund: true}, {At: 3, Cost: 0}}
	f.Add(encode(storetest.Scenario{Limit: bouncer.Limit{Algorithm: a, Rate: 4, Period: 6, Burst: 4, ChargeDenied: true}, Steps: charging}))
	f.Add(encode(storetest.Scenario{Limit: bouncer.Limit{Algorithm: a, Rate: 4, Period: 5, Burst: 4, ChargeDenied: true}, Steps: charging}))
	// Debts: charges past the capacity, refunds after them, checks while
	// they are paid back.
	debts := []storetest.Step{{Cost: 2}, {Cost: 9, Charge: true}, {Cost: 1}, {Cost: 0}, {At: 3, Cost: 3, Refund: true}, {At: 4, Cost: 1}, {At: 4, Cost: 20, Charge: true}, {At: 9, Cost: 1}}
	f.Add(encode(storetest.Scenario{Limit: bouncer.Limit{Algorithm: a, Rate: 4, Period: 12, Burst: 4}, Steps: debts}))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, steps := decode(a, data)
		if l.Validate() != nil {
			invalidNoPanic(l, steps, fn)
			return
		}
		if (a == bouncer.SlidingWindowLog || a == bouncer.Concurrency) && l.Rate > maxLogUnits {
			return
		}
		checkSequence(t, l, steps, fn)
	})
}

// invalidNoPanic runs every entry point on an invalid limit: whatever
// they answer, they must not panic.
func invalidNoPanic(l bouncer.Limit, steps []fuzzStep, fn algorithmFunc) {
	var s algo.State
	now := storetest.Start.UnixNano()
	for _, st := range steps {
		now += int64(st.advance % uint64(bouncer.MaxPeriod))
		switch {
		case st.refund:
			s = algo.Refund(l, s, now, st.cost)
			continue
		case st.charge:
			s = algo.Charge(l, s, now, st.cost)
			continue
		}
		fn(l, s, now, st.cost)
		s, _ = algo.Check(l, s, now, st.cost)
		algo.Expiry(l, s)
	}
}

func checkSequence(t *testing.T, l bouncer.Limit, steps []fuzzStep, fn algorithmFunc) {
	capacity := l.Capacity()
	p := algo.Prepare(l)
	tick := p.Tick()
	m := storetest.NewModel(l)
	var s algo.State
	now := storetest.Start.UnixNano()
	charged := false // a charge may leave a debt, in which even a peek is denied
	for i, st := range steps {
		now += int64(st.advance % uint64(2*bouncer.MaxPeriod)) // time never goes back
		if now-storetest.Start.UnixNano() > maxFuzzTime {
			return
		}
		cost := st.cost
		if cost < 0 || cost > bouncer.MaxRate {
			cost %= capacity + 2
			cost = max(cost, -cost)
		}
		if st.charge {
			if !store.Chargeable(l) {
				if next := algo.Charge(l, s, now, cost); next.T != s.T || next.N != s.N || len(next.Log) != len(s.Log) {
					t.Fatalf("step %d: a charge of %v changed its state from %+v to %+v", i, l, s, next)
				}
				continue
			}
			// The models count the units they hold: keep a debt to a few
			// capacities.
			if cost > 2*capacity+2 {
				cost %= 2*capacity + 3
			}
			// A bucket's debt stops at MaxDebt ahead of now, which the
			// models do not cut: a scenario that reaches it (an interval
			// of hours, charges of a few capacities) ends here.
			if l.Algorithm.UsesBurst() && (p.MaxDebt()-(max(s.T, now)-now))/p.Interval() <= cost+1 {
				return
			}
			s = algo.Charge(l, s, now, cost)
			m.Charge(now, cost)
			charged = true
			continue
		}
		if st.refund {
			s = algo.Refund(l, s, now, cost)
			m.Refund(now, cost)
			if _, r := algo.Check(l, s, now, 0); r.Remaining > capacity {
				t.Fatalf("step %d: refund %d: Remaining %d, want at most capacity %d", i, cost, r.Remaining, capacity)
			}
			continue
		}
		before := s
		entries := slices.Clone(s.Log)
		next, r := algo.Check(l, s, now, cost)
		if next2, r2 := fn(l, s, now, cost); r2 != r || next2.T != next.T || next2.N != next.N || !slices.Equal(next2.Log, next.Log) {
			t.Fatalf("step %d: %v disagrees with Check: got %+v, want %+v", i, l.Algorithm, r2, r)
		}
		if !slices.Equal(s.Log, entries) {
			t.Fatalf("step %d: Check wrote the entries of the state it was given: got %v, want %v", i, s.Log, entries)
		}
		checkInvariants(t, i, l, cost, charged, r)
		switch {
		case r.Allowed:
		case l.ChargeDenied:
			// A denied check is charged: the limit stays limited.
			if _, is := algo.Check(l, next, now, 0); is.Allowed || is.Remaining != 0 {
				t.Fatalf("step %d: denied under charge_denied, but a peek at the state it returns gives %+v, want denied with 0 remaining", i, is)
			}
		default:
			// A denied check may drop expired entries, but charges nothing.
			_, was := algo.Check(l, before, now, 0)
			if _, is := algo.Check(l, next, now, 0); is != was {
				t.Fatalf("step %d: denied, but a peek at the state it returns gives %+v, want %+v as before", i, is, was)
			}
		}
		if cost == 0 && (next.T != s.T || next.N != s.N) && l.ChargeDenied {
			t.Fatalf("step %d: a peek changed the state from %+v to %+v", i, s, next)
		}
		if got, want := storetest.Want(r), m.Check(now, cost); got != want {
			t.Fatalf("step %d (%v, at +%d, cost %d): got %v, want %v", i, l, now-storetest.Start.UnixNano(), cost, got, want)
		}
		s = next
		// The check's now: rounded down to the limit's tick.
		at := now - now%tick
		if _, peek := algo.Check(l, s, now, 0); time.Duration(max(algo.Expiry(l, s)-at, 0)) != peek.ResetAfter {
			t.Fatalf("step %d: Expiry is %v from now, want the ResetAfter %v of a peek", i, time.Duration(algo.Expiry(l, s)-at), peek.ResetAfter)
		}
	}
}

func checkInvariants(t *testing.T, i int, l bouncer.Limit, cost int64, charged bool, r algo.Result) {
	t.Helper()
	capacity := l.Capacity()
	switch {
	case r.Remaining < 0 || r.Remaining > capacity:
		t.Fatalf("step %d: Remaining %d, want within [0, %d]", i, r.Remaining, capacity)
	case r.ResetAfter < 0:
		t.Fatalf("step %d: ResetAfter %v, want ≥ 0", i, r.ResetAfter)
	case r.RetryAfter < 0:
		t.Fatalf("step %d: RetryAfter %v, want ≥ 0", i, r.RetryAfter)
	case r.Allowed && r.RetryAfter != 0:
		t.Fatalf("step %d: allowed with RetryAfter %v, want 0", i, r.RetryAfter)
	case !r.Allowed && r.RetryAfter == 0:
		t.Fatalf("step %d: denied with RetryAfter 0, want > 0", i)
	case cost == 0 && !r.Allowed && !l.ChargeDenied && !charged:
		t.Fatalf("step %d: cost 0 denied, want allowed", i)
	case !r.Allowed && l.ChargeDenied && r.Remaining != 0:
		t.Fatalf("step %d: denied under charge_denied with Remaining %d, want 0", i, r.Remaining)
	case cost > capacity && (r.Allowed || r.RetryAfter != bouncer.Never):
		t.Fatalf("step %d: cost %d above capacity %d: got allowed %t, retry %v, want denied, never", i, cost, capacity, r.Allowed, r.RetryAfter)
	case r.Delay < 0 || r.Delay > 0 && !l.Shape:
		t.Fatalf("step %d: Delay %v, want 0 unless shaping", i, r.Delay)
	}
}
