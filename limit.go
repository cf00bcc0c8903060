package bouncer

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/bouncerhq/bouncer/calendar"
)

// Bounds on a Limit's numbers. They keep every computation of every
// algorithm inside int64 nanoseconds.
const (
	// MaxRate bounds Rate and Burst (about 1.1 × 10¹²).
	MaxRate = 1 << 40
	// MaxPeriod bounds Period: ten years of 365.25 days.
	MaxPeriod = 10 * 8766 * time.Hour
)

// Limit is one rate limit: Rate units per Period, decided by Algorithm.
//
// A Limit is a value; build it as a literal and call Validate (or NewLimit)
// once, where it is configured. Stores validate again on every check and
// return an error wrapping ErrInvalidLimit rather than panic.
type Limit struct {
	// Name identifies the limit within a key, so that one key can carry
	// several limits (10/s and 1000/day). Stores keep separate state per
	// (key, Name); two limits of one key must not share a Name. It appears
	// in decisions as the binding limit.
	Name string

	// Algorithm decides. Required.
	Algorithm Algorithm

	// Rate is how many units the limit admits per Period, at least 1.
	// For Concurrency it is how many units may be in flight at once.
	Rate int64

	// Period is the time Rate refers to: the refill time of a bucket, a
	// window's length, or (Concurrency) how long a lease lives when it is
	// not released. A calendar limit's Period is its longest window,
	// Calendar.Longest() (NewLimit fills it in).
	Period time.Duration

	// Calendar, for FixedWindow only, counts in calendar days, weeks or
	// months of a time zone instead of Period-long windows from the Unix
	// epoch: a window starts at local midnight of its first day (the
	// anchor) and ends where the next starts, 23 to 25 hours for a day
	// across a clock change, 28 to 31 days for a month. The zero value
	// is no calendar. Headers and RetryAfter give the true end of the
	// window.
	Calendar calendar.Period

	// Burst is the capacity of TokenBucket and GCRA and the queue depth of
	// LeakyBucket, at least 1. The window and concurrency algorithms take
	// no burst: Burst must be 0 for them.
	Burst int64

	// Shape, for LeakyBucket only, admits what fits in the bucket with a
	// Decision.Delay instead of denying it, so that units leave at a steady
	// Rate (nginx's limit_req without nodelay).
	Shape bool

	// ChargeDenied charges the limit its cost also when a check is
	// denied, by this limit or by another limit of the check, as
	// envoyproxy/ratelimit and many API gateways count: a client that
	// keeps hammering stays limited. (Without it, a denied check charges
	// nothing.) Only FixedWindow and SlidingWindowCounter take it.
	//
	// The current window's count then saturates at Rate+1, "over": every
	// check, allowed or denied, sets count' = min(count + cost, Rate+1),
	// and is allowed only if count + cost ≤ Rate (for the sliding window
	// counter, plus the previous window's weight). A window that is over
	// denies every check until it resets, peeks (cost 0) included; a
	// denied check reports Remaining 0; a cost above Rate is denied with
	// RetryAfter Never, and charged. Refunds give units back from the
	// saturated count. Packing a count of Rate+1 needs a Period of at
	// least Rate+2 nanoseconds. A limit with ChargeDenied keeps its state
	// apart from the same limit without it: changing ChargeDenied starts
	// the limit afresh.
	ChargeDenied bool

	// OnStoreError decides the limit when a shared store cannot answer;
	// the zero value leaves it to the store. The in-memory store always
	// answers and ignores it.
	OnStoreError StoreErrorPolicy

	// Mode says how a hybrid limiter in front of a shared store decides
	// the limit: Strict (the zero value) asks the shared store every
	// time, Lease and Async decide locally (see Mode). The stores ignore
	// it. Concurrency and a shaping LeakyBucket are always Strict; the
	// sliding windows are Strict or Async.
	Mode Mode
}

// NewLimit returns l after validating it; see Validate. A calendar
// limit without a Period gets its longest window's.
func NewLimit(l Limit) (Limit, error) {
	if !l.Calendar.IsZero() && l.Period == 0 {
		l.Period = l.Calendar.Longest()
	}
	if err := l.Validate(); err != nil {
		return Limit{}, err
	}
	return l, nil
}

// Validate reports the first problem with l as a *LimitError naming the
// field, or nil if l is usable by every store.
func (l Limit) Validate() error {
	if err := l.validCalendar(); err != nil {
		return err
	}
	switch {
	case l.Rate < 1:
		return l.invalid("rate", fmt.Sprintf("must be at least 1, got %d", l.Rate))
	case l.Rate > MaxRate:
		return l.invalid("rate", fmt.Sprintf("must be at most %d, got %d", int64(MaxRate), l.Rate))
	case l.Period <= 0:
		return l.invalid("period", fmt.Sprintf("must be positive, got %v", l.Period))
	case l.Period > MaxPeriod:
		return l.invalid("period", fmt.Sprintf("must be at most %v, got %v", MaxPeriod, l.Period))
	case l.Rate > int64(l.Period):
		return l.invalid("rate", fmt.Sprintf("%d per %v is more than one unit per nanosecond", l.Rate, l.Period))
	case l.Rate == int64(l.Period) && (l.Algorithm == FixedWindow || l.Algorithm == SlidingWindowCounter):
		// The window algorithms pack a count of up to Rate into an
		// instant within the window, which needs Period > Rate.
		return l.invalid("rate", fmt.Sprintf("%s needs fewer than one unit per nanosecond, got %d per %v", l.Algorithm, l.Rate, l.Period))
	case l.Shape && l.Algorithm != LeakyBucket:
		return l.invalid("shape", "only leaky_bucket shapes")
	case l.ChargeDenied && l.Algorithm != FixedWindow && l.Algorithm != SlidingWindowCounter:
		return l.invalid("charge_denied", fmt.Sprintf("only fixed_window and sliding_window_counter charge denied checks, not %s", l.Algorithm))
	case l.ChargeDenied && l.Rate+2 > int64(l.Period):
		// A count of up to Rate+1 packs into an instant within the
		// window only when Period ≥ Rate+2.
		return l.invalid("charge_denied", fmt.Sprintf("%s charging denied checks needs a period of at least rate+2 ns, got %d per %v", l.Algorithm, l.Rate, l.Period))
	case !l.OnStoreError.Valid():
		return l.invalid("on_store_error", fmt.Sprintf("unknown policy %d", uint8(l.OnStoreError)))
	case !l.Mode.Valid():
		return l.invalid("mode", fmt.Sprintf("unknown mode %d", uint8(l.Mode)))
	case l.Mode != Strict && l.Algorithm == Concurrency:
		// Units in flight come back when a request ends, on whichever
		// instance it ran: only the shared store can count them.
		return l.invalid("mode", fmt.Sprintf("concurrency is always strict, got %s", l.Mode))
	case l.Mode == Lease && (l.Algorithm == SlidingWindowLog || l.Algorithm == SlidingWindowCounter):
		// A sliding window counts a unit from when it is charged: units
		// leased ahead would leave the window before they are spent.
		return l.invalid("mode", fmt.Sprintf("%s cannot lease: use strict or async", l.Algorithm))
	case l.Mode != Strict && l.Shape:
		// A shaped request's delay is its place in the one shared queue.
		return l.invalid("mode", fmt.Sprintf("a shaping leaky_bucket is always strict, got %s", l.Mode))
	}
	if !l.Algorithm.UsesBurst() {
		if l.Burst != 0 {
			return l.invalid("burst", fmt.Sprintf("%s takes no burst, got %d", l.Algorithm, l.Burst))
		}
		return nil
	}
	switch {
	case l.Burst < 1:
		return l.invalid("burst", fmt.Sprintf("must be at least 1, got %d", l.Burst))
	case l.Burst > MaxRate:
		return l.invalid("burst", fmt.Sprintf("must be at most %d, got %d", int64(MaxRate), l.Burst))
	}
	// A bucket's capacity in nanoseconds must stay well inside int64; twice
	// MaxPeriod leaves room for the interval's rounding up.
	hi, lo := bits.Mul64(uint64(l.Burst), uint64(l.Interval()))
	if hi != 0 || lo > 2*uint64(MaxPeriod) {
		return l.invalid("burst", fmt.Sprintf("%d units at %d per %v take longer than %v to refill", l.Burst, l.Rate, l.Period, 2*MaxPeriod))
	}
	return nil
}

// Capacity is the most units the limit can admit at once: Burst for the
// bucket algorithms, Rate otherwise. A check costing more is never allowed.
func (l Limit) Capacity() int64 {
	if l.Algorithm.UsesBurst() {
		return l.Burst
	}
	return l.Rate
}

// Interval is the time one unit of l takes to refill or drain:
// Period/Rate, rounded up to a whole nanosecond so that a limit never
// admits more than its rate. It is 0 when Rate or Period is not
// positive, and meaningful only for a valid limit. Validate bounds a
// bucket's Burst × Interval by twice MaxPeriod, so that a store's
// arithmetic in nanoseconds stays inside int64.
func (l Limit) Interval() time.Duration {
	if l.Rate <= 0 || l.Period <= 0 {
		return 0
	}
	return (l.Period + time.Duration(l.Rate) - 1) / time.Duration(l.Rate)
}

// String describes l as in "token_bucket 10/1s burst 20".
func (l Limit) String() string {
	s := fmt.Sprintf("%s %d/%v", l.Algorithm, l.Rate, l.Period)
	if !l.Calendar.IsZero() {
		s = fmt.Sprintf("%s %d/%v", l.Algorithm, l.Rate, l.Calendar)
	}
	if l.Algorithm.UsesBurst() {
		s += fmt.Sprintf(" burst %d", l.Burst)
	}
	if l.Shape {
		s += " shape"
	}
	if l.ChargeDenied {
		s += " charge_denied"
	}
	if l.OnStoreError != StoreErrorDefault {
		s += " on_store_error " + l.OnStoreError.String()
	}
	if l.Mode != Strict {
		s += " mode " + l.Mode.String()
	}
	if l.Name != "" {
		s = l.Name + ": " + s
	}
	return s
}

// validCalendar checks the algorithm, and a calendar limit's calendar
// and Period.
func (l Limit) validCalendar() error {
	switch {
	case !l.Algorithm.Valid():
		return l.invalid("algorithm", fmt.Sprintf("unknown algorithm %d", uint8(l.Algorithm)))
	case l.Calendar.IsZero():
		return nil
	case l.Algorithm != FixedWindow:
		return l.invalid("calendar", fmt.Sprintf("only fixed_window counts in calendar periods, not %s", l.Algorithm))
	}
	if err := l.Calendar.Validate(); err != nil {
		return l.invalid("calendar", err.Error())
	}
	if want := l.Calendar.Longest(); l.Period != want {
		return l.invalid("period", fmt.Sprintf("a %s limit's period is its longest window, %v (calendar.Period.Longest), got %v", l.Calendar.Unit, want, l.Period))
	}
	return nil
}

func (l Limit) invalid(field, reason string) error {
	return &LimitError{Name: l.Name, Field: field, Reason: reason}
}
