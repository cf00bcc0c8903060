package store

import (
	"fmt"

	"github.com/bouncerhq/bouncer"
)

// Chargeable reports whether l can be charged after the fact (Charger):
// every algorithm but Concurrency, whose units are leases held while a
// request runs, and a shaping LeakyBucket, whose Delay is decided before
// the request.
func Chargeable(l bouncer.Limit) bool {
	return l.Algorithm.Valid() && l.Algorithm != bouncer.Concurrency && !(l.Algorithm == bouncer.LeakyBucket && l.Shape)
}

// ValidateCharge reports an error wrapping bouncer.ErrInvalidRequest or
// bouncer.ErrInvalidLimit if a store cannot Charge r: r is invalid
// (Validate), a peek, or names a limit that is not Chargeable.
func ValidateCharge(r bouncer.Request) error {
	if r.Peek {
		return fmt.Errorf("%w: a peek charges nothing: a charge takes Cost units", bouncer.ErrInvalidRequest)
	}
	if err := Validate(r); err != nil {
		return err
	}
	for _, k := range r.Keys {
		for _, l := range k.Limits {
			if !Chargeable(l) {
				return fmt.Errorf("%w: key %q, limit %q: a %s cannot be charged after the fact", bouncer.ErrInvalidRequest, k.Key, l.Name, chargeName(l))
			}
		}
	}
	return nil
}

func chargeName(l bouncer.Limit) string {
	if l.Algorithm == bouncer.LeakyBucket {
		return "shaping leaky_bucket"
	}
	return l.Algorithm.String()
}
