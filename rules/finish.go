package rules

import "math"

// finish sets the response's Code and Binding from its statuses, under
// either semantics: the request is over the limit when any status is
// (shadow rules' never are), or when every quota-mode status is; the
// binding status is the first over-limit one, else the one with the
// least remaining.
func (r *Response) finish() {
	quota, quotaOver, firstQuotaOver := 0, 0, -1
	least := uint32(math.MaxUint32)
	for i := range r.Statuses {
		st := &r.Statuses[i]
		switch {
		case st.quotaMode():
			quota++
			if st.Code == OverLimit {
				quotaOver++
				if firstQuotaOver < 0 {
					firstQuotaOver = i
				}
			}
		case st.Code == OverLimit:
			if r.Code != OverLimit {
				r.Binding = i
			}
			r.Code = OverLimit
			continue
		}
		if r.Code != OverLimit && st.Limit != nil && (r.Binding < 0 || st.Remaining < least) {
			r.Binding, least = i, st.Remaining
		}
	}
	if r.Code != OverLimit && quota > 0 && quotaOver == quota {
		r.Code, r.Binding = OverLimit, firstQuotaOver
	}
}

// quotaMode reports whether st is a limited status of a quota-mode rule:
// over its limit, it denies the request only when every such status of
// the request is over its own (envoyproxy/ratelimit's rule since it
// fixed quota results, after the version the differential test pins).
func (st *Status) quotaMode() bool {
	return st.Rule != nil && st.Rule.QuotaMode && st.Limit != nil && !st.Unlimited
}

func clamp32(n int64) uint32 { return uint32(min(max(n, 0), math.MaxUint32)) }
