package storetest

import (
	"math/big"
	"time"

	"github.com/bouncerhq/bouncer"
)

// bucketModel is the token bucket, GCRA and leaky bucket as one bucket of
// tokens, an exact rational that refills 1/interval per nanosecond up to
// capacity, with interval = ⌈Period/Rate⌉. The leaky bucket's level is the
// room the tokens leave: (capacity − tokens) × interval nanoseconds.
type bucketModel struct {
	capacity *big.Rat
	interval *big.Rat
	shape    bool
	tokens   *big.Rat
	last     int64
	started  bool
}

func newBucketModel(l bouncer.Limit) *bucketModel {
	interval := (int64(l.Period) + l.Rate - 1) / l.Rate
	return &bucketModel{
		capacity: new(big.Rat).SetInt64(l.Burst),
		interval: new(big.Rat).SetInt64(interval),
		shape:    l.Shape,
		tokens:   new(big.Rat).SetInt64(l.Burst),
	}
}

// refill adds the tokens of the time since the last call.
func (m *bucketModel) refill(now int64) {
	if m.started && now > m.last {
		add := new(big.Rat).SetInt64(now - m.last)
		m.tokens.Add(m.tokens, add.Quo(add, m.interval))
		if m.tokens.Cmp(m.capacity) > 0 {
			m.tokens.Set(m.capacity)
		}
	}
	m.started, m.last = true, now
}

// nanos returns how long n tokens take to refill.
func (m *bucketModel) nanos(n *big.Rat) time.Duration {
	d := new(big.Rat).Mul(n, m.interval)
	if !d.IsInt() {
		panic("storetest: bucket model: fractional nanoseconds")
	}
	return time.Duration(d.Num().Int64())
}

func (m *bucketModel) missing() time.Duration {
	return m.nanos(new(big.Rat).Sub(m.capacity, m.tokens))
}

// remaining returns the whole tokens left, 0 in debt.
func (m *bucketModel) remaining() int64 {
	if m.tokens.Sign() < 0 {
		return 0
	}
	return new(big.Int).Quo(m.tokens.Num(), m.tokens.Denom()).Int64()
}

func (m *bucketModel) Check(now, cost int64) Want {
	m.refill(now)
	c := new(big.Rat).SetInt64(cost)
	if c.Cmp(m.capacity) > 0 {
		return never(m.remaining(), int64(m.missing()))
	}
	if c.Cmp(m.tokens) > 0 {
		return Want{
			Remaining:  m.remaining(),
			ResetAfter: m.missing(),
			RetryAfter: m.nanos(c.Sub(c, m.tokens)),
		}
	}
	w := Want{Allowed: true}
	if m.shape && cost > 0 {
		w.Delay = m.missing() // the level ahead of these units
	}
	m.tokens.Sub(m.tokens, c)
	w.Remaining = m.remaining()
	w.ResetAfter = m.missing()
	return w
}

func (m *bucketModel) Refund(now, n int64) {
	m.refill(now)
	m.tokens.Add(m.tokens, new(big.Rat).SetInt64(n))
	if m.tokens.Cmp(m.capacity) > 0 {
		m.tokens.Set(m.capacity)
	}
}

// Charge takes cost tokens, below zero if need be: the debt refills like
// any missing token.
func (m *bucketModel) Charge(now, cost int64) {
	m.refill(now)
	m.tokens.Sub(m.tokens, new(big.Rat).SetInt64(cost))
}
