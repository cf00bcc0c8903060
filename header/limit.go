package header

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// ConcurrentRequests is the quota unit of a concurrency limit.
const ConcurrentRequests = "concurrent-requests"

// ForLimit returns the Values of limit l under the policy name policy,
// before any decision: its quota (Limit, q and X-RateLimit-Limit), its
// window (Window, w) and its quota unit. It is the one definition of what
// the fields say of a limit, for every writer (docs/middleware.md, "What
// each field means"):
//
//   - token_bucket, gcra, leaky_bucket: the quota is the capacity, Burst,
//     and the window the time an empty bucket takes to refill (a full one
//     to drain), Burst × Interval. q/w is then the limit's rate, and
//     Remaining counts down from q.
//   - fixed_window, sliding_window_log, sliding_window_counter: Rate per
//     Period.
//   - concurrency: Rate units in flight, of quota unit
//     concurrent-requests, with no window.
//
// l need not be valid: a Rate of 0 (a limit that admits nothing) gives a
// quota of 0.
func ForLimit(policy string, l bouncer.Limit) Values {
	v := Values{Policy: policy, Limit: max(l.Capacity(), 0)}
	switch {
	case l.Algorithm == bouncer.Concurrency:
		v.QuotaUnit = ConcurrentRequests
	case l.Algorithm.UsesBurst():
		v.Window = time.Duration(max(l.Burst, 0)) * l.Interval()
	default:
		v.Window = max(l.Period, 0)
	}
	return v
}

// Decided returns v, the Values of a limit (ForLimit), reporting d, a
// decision whose binding limit it is: Remaining, Reset, Denied and
// RetryAfter. Remaining is never above Limit, and Reset never past
// Window when there is one: for a sliding_window_counter, whose estimate
// frees the current window's units gradually over the next one, Reset is
// then the window. A denied decision with no RetryAfter of its own reports
// its Reset as RetryAfter.
func (v Values) Decided(d bouncer.Decision) Values {
	v.Remaining = min(max(d.Remaining, 0), v.Limit)
	v.Reset = max(d.ResetAfter, 0)
	if v.Window > 0 {
		v.Reset = min(v.Reset, v.Window)
	}
	v.Denied, v.RetryAfter = !d.Allowed, d.RetryAfter
	if v.Denied && v.RetryAfter <= 0 {
		v.RetryAfter = v.Reset
	}
	return v
}
