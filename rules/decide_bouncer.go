package rules

import (
	"context"
	"math"
	"slices"

	"github.com/bouncerhq/bouncer"
)

// decideTogether decides the matched descriptors as one all-or-nothing
// check (shadow rules as a second one, so that they never block or undo
// the others), then reports each descriptor's own state.
func (e *Engine) decideTogether(ctx context.Context, ms []*matched, resp *Response) error {
	order, members := groupByCost(ms, resp)
	// Groups of different costs are checked in turn; if one that may deny
	// does, what the others charged is given back (undo), so that the
	// request stays all or nothing.
	var mine []int     // resp.charges of the groups that may deny
	var undone [][]int // their descriptors
	denied := false
	for _, g := range order {
		idx := members[g]
		req := bouncer.Request{Cost: g.cost, Peek: g.cost == 0}
		first := map[string]int{} // a key named twice is checked once
		for _, i := range idx {
			if _, dup := first[ms[i].key]; dup {
				continue
			}
			first[ms[i].key] = i
			req.Keys = append(req.Keys, bouncer.KeyLimits{Key: ms[i].key, Limits: ms[i].limits})
		}
		dec, err := e.limiter().Check(ctx, req)
		if err != nil {
			return err
		}
		denied = denied || (!dec.Allowed && !g.shadow)
		if dec.Allowed && g.cost > 0 {
			for _, k := range req.Keys {
				m := ms[first[k.Key]]
				if !g.shadow {
					mine = append(mine, len(resp.charges))
				}
				resp.charges = append(resp.charges, charge(m.rule, k.Key, k.Limits, g.cost))
			}
			if !g.shadow {
				undone = append(undone, idx)
			}
		}
		for _, i := range idx {
			st := &resp.Statuses[i]
			own := dec
			if ms[i].key != dec.Key && len(req.Keys) > 1 {
				// The decision describes the binding key; peek at this
				// one to report its own state. A peek denies only what is
				// over by itself (a charge_denied window counted past its
				// limit), so the other descriptors of a denied check read
				// OK.
				own, err = e.limiter().Check(ctx, bouncer.Request{
					Keys: []bouncer.KeyLimits{{Key: ms[i].key, Limits: ms[i].limits}},
					Peek: true,
				})
				if err != nil {
					return err
				}
			}
			setStatus(st, ms[i], own)
			if dec.Allowed {
				st.Delay = dec.Delay // the group's check is what admits it
			}
		}
	}
	if !denied {
		return nil
	}
	return e.undo(ctx, resp, ms, mine, undone)
}

// undo gives back the charges of resp at the indexes mine, those of the
// groups of a request that another group denied, and reports the
// descriptors undone as uncharged.
func (e *Engine) undo(ctx context.Context, resp *Response, ms []*matched, mine []int, undone [][]int) error {
	var undo []bouncer.Charge
	kept := resp.charges[:0:0]
	for i, c := range resp.charges {
		if slices.Contains(mine, i) {
			undo = append(undo, c)
		} else {
			kept = append(kept, c)
		}
	}
	resp.charges = kept
	for _, idx := range undone {
		for _, i := range idx {
			st := &resp.Statuses[i]
			st.Remaining, st.Delay = clamp32(int64(st.Remaining)+ms[i].cost), 0
		}
	}
	return bouncer.NewLedger(e.limiter(), undo).End(ctx, bouncer.Unserved)
}

// costGroup is the descriptors of a request checked together: those of
// one cost, shadow (or quota) rules apart.
type costGroup struct {
	shadow bool
	cost   int64
}

// groupByCost fills the statuses of the descriptors that need no check
// (unlimited, or a limit of 0) and groups the others, in the order of
// their first descriptor.
func groupByCost(ms []*matched, resp *Response) ([]costGroup, map[costGroup][]int) {
	var order []costGroup
	members := map[costGroup][]int{}
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
		if len(m.limits) == 0 {
			if m.cost > 0 {
				st.Code, st.RetryAfter = OverLimit, bouncer.Never
			}
			continue
		}
		g := costGroup{shadow: m.shadow || m.quota, cost: m.cost}
		if _, ok := members[g]; !ok {
			order = append(order, g)
		}
		members[g] = append(members[g], i)
	}
	return order, members
}

// setStatus fills a Bouncer-semantics status from the decision that
// describes its key.
func setStatus(st *Status, m *matched, d bouncer.Decision) {
	st.Remaining = clamp32(d.Remaining)
	st.ResetAfter, st.RetryAfter, st.Degraded = d.ResetAfter, d.RetryAfter, d.Degraded
	if i := slices.IndexFunc(m.limits, func(l bouncer.Limit) bool { return l.Name == d.LimitName }); i >= 0 {
		l := m.limits[i]
		st.Limit = &CurrentLimit{Name: l.Name, RequestsPerUnit: clamp32(l.Rate), Unit: unitOf(l.Period), Window: l.Period}
		st.Decided = l
		if m.rule != nil && m.rule.Prices != nil {
			st.Budget = Budget{Currency: m.rule.Prices.Currency, Remaining: max(d.Remaining, 0), Limit: l.Rate}
		}
	}
	if !d.Allowed {
		st.Code = OverLimit
		if m.shadow || m.quota {
			st.Code, st.Shadowed = OK, true
		}
		if m.quota {
			st.ResetAfter = 0
		}
	}
}
