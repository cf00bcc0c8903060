package algo

import (
	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// Charge takes cost units from l's state at now whatever it holds, and
// returns the new state: it never denies. What goes past the limit's
// capacity is a debt, which later checks see as a state over the limit:
// they are denied until time pays it back (each algorithm's chargeX says
// how; docs/algorithms.md has the table). l must be Chargeable
// (store.Chargeable); any other
// limit, and a cost ≤ 0, returns s. It is shorthand for
// Prepare(l).Charge(s, now, cost).
func Charge(l bouncer.Limit, s State, now, cost int64) State {
	p := Prepare(l)
	return p.Charge(s, now, cost)
}

// Charge takes cost units at now; see the package function Charge. Like
// Refund, it may modify the entries that s sees.
func (p *Params) Charge(s State, now, cost int64) State {
	if cost <= 0 || !store.Chargeable(p.Limit) {
		return s
	}
	if p.OneWord() {
		s.T = p.ChargeWord(s.T, now, cost)
		return s
	}
	now = p.at(now)
	if s.T-now > p.far {
		s = State{} // read as fresh (see Far)
	}
	switch p.Limit.Algorithm {
	case bouncer.SlidingWindowLog:
		return p.chargeSlidingWindowLog(s, now, cost)
	case bouncer.SlidingWindowCounter:
		return p.chargeSlidingWindowCounter(s, now, cost)
	}
	return s
}

// ChargeWord is Charge for the limits whose state is one word
// (Params.OneWord): t is State.T.
func (p *Params) ChargeWord(t, now, cost int64) int64 {
	if cost <= 0 || !store.Chargeable(p.Limit) {
		return t
	}
	now = p.at(now)
	if t-now > p.far {
		t = 0 // read as fresh (see Far)
	}
	switch p.Limit.Algorithm {
	case bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket:
		return p.chargeTime(t, now, cost)
	case bouncer.FixedWindow:
		return p.chargeFixedWindow(t, now, cost)
	case bouncer.SlidingWindowCounter:
		return p.chargeSlidingWindowCounter(State{T: t}, now, cost).T
	}
	return t
}
