package store

import (
	"fmt"

	"github.com/bouncerhq/bouncer"
)

// Validate reports an error wrapping bouncer.ErrInvalidRequest or
// bouncer.ErrInvalidLimit if a store cannot decide r: a negative cost, a
// cost of 0 without Peek (or a peek with a cost), no keys, a key without
// limits, an invalid limit, or two limits of one key sharing a name. A
// store calls it first in Check, Refund and Reset.
func Validate(r bouncer.Request) error {
	switch {
	case r.Cost < 0:
		return fmt.Errorf("%w: cost %d is negative", bouncer.ErrInvalidRequest, r.Cost)
	case r.Cost == 0 && !r.Peek:
		return fmt.Errorf("%w: cost 0 charges nothing: set Cost (1 for one request), or Peek to look without charging", bouncer.ErrInvalidRequest)
	case r.Cost != 0 && r.Peek:
		return fmt.Errorf("%w: a peek charges nothing, so its cost must be 0, got %d", bouncer.ErrInvalidRequest, r.Cost)
	}
	if len(r.Keys) == 0 {
		return fmt.Errorf("%w: no keys", bouncer.ErrInvalidRequest)
	}
	for _, k := range r.Keys {
		if len(k.Limits) == 0 {
			return fmt.Errorf("%w: key %q has no limits", bouncer.ErrInvalidRequest, k.Key)
		}
		for i, l := range k.Limits {
			if err := l.Validate(); err != nil {
				return err
			}
			for _, o := range k.Limits[:i] {
				if o.Name == l.Name {
					return fmt.Errorf("%w: key %q has two limits named %q", bouncer.ErrInvalidRequest, k.Key, l.Name)
				}
			}
		}
	}
	return nil
}
