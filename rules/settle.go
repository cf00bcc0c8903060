package rules

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

// ReportTooLargeError is Report's error for a descriptor whose hits are
// above what one report may charge its rule (Rule.MaxReport or its
// default). It wraps bouncer.ErrInvalidRequest.
type ReportTooLargeError struct {
	Descriptor int    // the descriptor's index in the request
	Rule       string // its rule's Label
	Hits, Max  int64
}

func (e *ReportTooLargeError) Error() string {
	return fmt.Sprintf("descriptors[%d]: hits %d above %d, the most one report may charge rule %q (its max_report)", e.Descriptor, e.Hits, e.Max, e.Rule)
}

// Unwrap returns bouncer.ErrInvalidRequest.
func (e *ReportTooLargeError) Unwrap() error { return bouncer.ErrInvalidRequest }

// Report charges r's hits to the limits of its descriptors without
// deciding: whatever the limits hold, past them if need be (a debt that
// later requests are refused until time pays it back). It is how a cost
// known only after a request is served is counted by a caller that did
// not reserve it. Each status reports the descriptor's state after the
// charge, and is OverLimit when its limit has nothing left, so that the
// next request of that descriptor will be refused (shadow and quota-mode
// rules' too: Report decides nothing, and the response's Code says
// whether any limit has nothing left). Descriptors with no rule, or an
// unlimited one, are charged nothing. A descriptor whose hits are above
// its rule's report bound (Rule.MaxReport) fails the whole report with a
// *ReportTooLargeError before anything is charged. The other errors are
// Decide's; a Limiter that is not a store.Charger fails with an error
// wrapping errors.ErrUnsupported.
func (e *Engine) Report(ctx context.Context, r Request) (Response, error) {
	d := e.Config().Domain(r.Domain)
	if err := r.validate(); err != nil {
		return Response{}, err
	}
	resp := Response{Code: OK, Statuses: make([]Status, len(r.Descriptors)), Binding: -1}
	for i := range resp.Statuses {
		resp.Statuses[i].Code = OK
	}
	if d == nil {
		e.unknownDomain(ctx, r.Domain)
		if e.RejectUnknownDomains {
			return Response{}, fmt.Errorf("%w: %q", ErrUnknownDomain, r.Domain)
		}
		return resp, nil
	}
	if err := d.checkOverrides(&r); err != nil {
		return Response{}, err
	}
	ms, _ := d.matchAll(&r)
	if d.custom {
		e.custom(ctx, ms)
	}
	for i, m := range ms {
		if m.counted() && m.cost > m.reportBound() {
			return Response{}, &ReportTooLargeError{Descriptor: i, Rule: m.rule.Label(), Hits: m.cost, Max: m.reportBound()}
		}
	}
	ch, ok := e.limiter().(store.Charger)
	for i, m := range ms {
		if m == nil {
			continue
		}
		st := &resp.Statuses[i]
		st.Rule = m.rule
		if m.unlimited {
			st.Unlimited, st.Remaining = true, math.MaxUint32
			continue
		}
		st.Limit, st.Key = &m.report, m.key
		if !m.counted() {
			st.Code = OverLimit // a limit of 0: nothing is ever left
			continue
		}
		if m.cost > 0 {
			if !ok {
				return Response{}, fmt.Errorf("rules: %T cannot charge without deciding: %w", e.limiter(), errors.ErrUnsupported)
			}
			if err := ch.Charge(ctx, m.request()); err != nil {
				return Response{}, err
			}
		}
		dec, err := e.limiter().Check(ctx, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: m.key, Limits: m.limits}}, Peek: true})
		if err != nil {
			return Response{}, err
		}
		if d.Semantics == EnvoySemantics {
			st.ResetAfter = untilReset(m.report.Unit, e.now())
			m.fill(st, m.judge(dec))
		} else {
			setStatus(st, m, dec)
		}
		st.Code, st.Shadowed, st.RetryAfter = OK, false, 0
		if st.Remaining == 0 {
			st.Code = OverLimit
		}
	}
	resp.finishReport()
	return resp, nil
}

// finishReport sets a report's Code and Binding: over the limit when any
// status is, the binding status the first such, else the one with the
// least remaining.
func (r *Response) finishReport() {
	least := uint32(math.MaxUint32)
	for i := range r.Statuses {
		st := &r.Statuses[i]
		switch {
		case st.Code == OverLimit && r.Code != OverLimit:
			r.Code, r.Binding = OverLimit, i
		case r.Code != OverLimit && st.Limit != nil && (r.Binding < 0 || st.Remaining < least):
			r.Binding, least = i, st.Remaining
		}
	}
}
