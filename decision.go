package bouncer

import (
	"math"
	"time"
)

// Never is the RetryAfter of a check that can never pass, because its cost
// exceeds a limit's capacity. Edges report it as "never", not as a time.
const Never = time.Duration(math.MaxInt64)

// Decision is the answer to a check.
//
// Capacity, Remaining, ResetAfter, Key and LimitName describe the binding
// limit: the one with the least Remaining (ties go to the longer
// RetryAfter, then the longer ResetAfter), which is what rate-limit
// headers report. A limit that denies
// always has less remaining than one that allows, so a denied decision's
// binding limit is one that denied. RetryAfter is the longest over all
// limits.
type Decision struct {
	// Allowed reports whether the check passed and was charged.
	Allowed bool

	// Capacity is the binding limit's capacity (Limit.Capacity): the most
	// units it admits at once.
	Capacity int64

	// Remaining is how many units the binding limit would still admit now,
	// after this check's charge if it was allowed. Never negative.
	Remaining int64

	// ResetAfter is how long until the binding limit is back to full
	// capacity (for windows: until its window resets), if nothing else is
	// charged.
	ResetAfter time.Duration

	// RetryAfter is how long until a check of the same cost would pass,
	// if nothing else is charged: 0 when allowed, Never when the cost
	// exceeds a capacity.
	RetryAfter time.Duration

	// Delay is how long an allowed request should wait before it proceeds:
	// the longest over its limits. Only a shaping LeakyBucket sets it, and
	// it is 0 when the check is denied.
	Delay time.Duration

	// Key and LimitName identify the binding limit.
	Key       string
	LimitName string

	// Degraded reports that the shared store could not answer, so that
	// the decision follows the limits' StoreErrorPolicy instead.
	Degraded bool
}
