package bouncer

import (
	"errors"
	"fmt"
)

// Errors that stores return. Denial is never an error.
var (
	// ErrInvalidLimit is wrapped by every *LimitError.
	ErrInvalidLimit = errors.New("bouncer: invalid limit")
	// ErrInvalidRequest reports a request that cannot be decided as
	// given, the caller's fault and not an outage: to a store, no keys, a
	// key without limits, a negative cost, a cost of 0 without Peek (or a
	// peek with a cost), or two limits of one key sharing a name; to
	// rules.Engine, a descriptor, override, report or settle it cannot
	// take. Transports answer it with 400 or INVALID_ARGUMENT.
	ErrInvalidRequest = errors.New("bouncer: invalid request")
)

// LimitError says which field of which limit is invalid and why.
type LimitError struct {
	Name   string // the limit's Name, possibly empty
	Field  string // "algorithm", "rate", "period", "burst", "shape", "on_store_error" or "charge_denied"
	Reason string
}

func (e *LimitError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("bouncer: limit %q: %s: %s", e.Name, e.Field, e.Reason)
	}
	return fmt.Sprintf("bouncer: limit: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalidLimit.
func (e *LimitError) Unwrap() error { return ErrInvalidLimit }
