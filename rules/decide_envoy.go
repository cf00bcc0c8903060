package rules

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/bouncerhq/bouncer"
)

// decideEach charges every matched descriptor on its own, over-limit hits
// included, as envoyproxy/ratelimit does.
func (e *Engine) decideEach(ctx context.Context, d *Domain, ms []*matched, resp *Response) error {
	now := e.now()
	checks := 0
	for i, m := range ms {
		st := &resp.Statuses[i]
		if m == nil {
			continue
		}
		st.Rule = m.rule
		if m.unlimited {
			st.Unlimited, st.Remaining = true, math.MaxUint32
			continue
		}
		st.Limit, st.Key = &m.report, m.key
		st.ResetAfter = untilReset(m.report.Unit, now)
		if len(m.limits) == 0 { // requests_per_unit 0 admits nothing
			if m.cost > 0 {
				st.Code, st.RetryAfter = OverLimit, bouncer.Never
			}
			continue
		}
		checks++
	}
	if checks > 1 && e.Concurrent && distinctKeys(ms) {
		return e.checkConcurrently(ctx, ms, resp)
	}
	for i, m := range ms {
		if !m.counted() {
			continue
		}
		if err := e.checkOne(ctx, m, resp, i); err != nil {
			return err
		}
	}
	return nil
}

// checkOne charges descriptor i, m, on its own and fills its status.
func (e *Engine) checkOne(ctx context.Context, m *matched, resp *Response, i int) error {
	dec, err := e.limiter().Check(ctx, m.request())
	if err != nil {
		return err
	}
	dec = m.judge(dec)
	m.fill(&resp.Statuses[i], dec)
	resp.charged(m, dec)
	return nil
}

// request is the check of m's descriptor on its own.
func (m *matched) request() bouncer.Request {
	return bouncer.Request{
		Keys: []bouncer.KeyLimits{{Key: m.key, Limits: m.limits}},
		Cost: m.cost,
		Peek: m.cost == 0,
	}
}

// fill fills in st from dec, the decision of m.request().
func (m *matched) fill(st *Status, dec bouncer.Decision) {
	st.Remaining = clamp32(dec.Remaining)
	st.RetryAfter, st.Delay, st.Degraded = dec.RetryAfter, dec.Delay, dec.Degraded
	if !dec.Allowed {
		st.Code = OverLimit
		if m.shadow {
			st.Code, st.Shadowed = OK, true
		}
		// A quota-mode status stays over the limit; finish decides
		// whether it denies the request.
	}
}

// checkConcurrently checks every descriptor at once (bouncer.CheckEach):
// for a store with round trips, the answer then takes one of them, not
// one per descriptor. Only for distinct keys, whose order does not matter.
func (e *Engine) checkConcurrently(ctx context.Context, ms []*matched, resp *Response) error {
	var (
		rbuf [4]bouncer.Request
		dbuf [4]bouncer.Decision
		ebuf [4]error
		ibuf [4]int
	)
	rs, idx := rbuf[:0], ibuf[:0]
	for i, m := range ms {
		if m.counted() {
			rs, idx = append(rs, m.request()), append(idx, i)
		}
	}
	ds, errs := bouncer.CheckEach(ctx, e.limiter(), rs, dbuf[:0], ebuf[:0])
	for k, i := range idx {
		if errs[k] == nil {
			dec := ms[i].judge(ds[k])
			ms[i].fill(&resp.Statuses[i], dec)
			resp.charged(ms[i], dec)
		}
	}
	return errors.Join(errs...)
}

func distinctKeys(ms []*matched) bool {
	for i, m := range ms {
		if m == nil {
			continue
		}
		for _, o := range ms[:i] {
			if o != nil && o.key == m.key {
				return false
			}
		}
	}
	return true
}

// untilReset is envoyproxy/ratelimit's duration_until_reset: the unit
// minus the Unix time in whole seconds modulo the unit.
func untilReset(u Unit, now time.Time) time.Duration {
	sec := int64(u.Duration() / time.Second)
	if sec == 0 {
		return 0
	}
	return time.Duration(sec-now.Unix()%sec) * time.Second
}
