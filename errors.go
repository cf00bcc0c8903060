package bouncer

import (
	"errors"
	"fmt"
)

// Errors that stores return. Denial is never an error.
var (
	// ErrInvalidLimit is wrapped by every *LimitError.
	ErrInvalidLimit = errors.New("bouncer: invalid limit")
	// ErrInvalidRequest reports a request a store cannot decide: no keys,
	// a key without limits, a negative cost, a cost of 0 without Peek (or
	// a peek with a cost), or two limits of one key sharing a name.
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
