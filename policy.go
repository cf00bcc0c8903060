package bouncer

import "fmt"

// StoreErrorPolicy says how a limit decides when its store cannot answer:
// the shared store is down, too slow for the check's deadline, or its
// circuit breaker is open. Decisions made this way are marked
// Decision.Degraded.
type StoreErrorPolicy uint8

const (
	// StoreErrorDefault leaves the choice to the store's own default.
	StoreErrorDefault StoreErrorPolicy = iota
	// StoreErrorAllow fails open: the limit allows.
	StoreErrorAllow
	// StoreErrorDeny fails closed: the limit denies, retry-after unknown
	// (reported as the limit's interval).
	StoreErrorDeny
	// StoreErrorLocal checks the limit in a per-instance in-memory store:
	// each instance enforces the limit on its own.
	StoreErrorLocal
)

var storeErrorPolicyNames = [...]string{"", "allow", "deny", "local"}

// String returns the policy's configuration name ("allow", "deny",
// "local"; "" for the default).
func (p StoreErrorPolicy) String() string {
	if int(p) < len(storeErrorPolicyNames) {
		return storeErrorPolicyNames[p]
	}
	return fmt.Sprintf("StoreErrorPolicy(%d)", uint8(p))
}

// For returns the policy that decides l in a store whose own policy is
// p: l's OnStoreError, else p, else StoreErrorLocal, every store's
// default. It is the one place where the default is chosen.
func (p StoreErrorPolicy) For(l Limit) StoreErrorPolicy {
	switch {
	case l.OnStoreError != StoreErrorDefault:
		return l.OnStoreError
	case p != StoreErrorDefault:
		return p
	}
	return StoreErrorLocal
}

// Valid reports whether p is one of the policies above.
func (p StoreErrorPolicy) Valid() bool { return p <= StoreErrorLocal }

// ParseStoreErrorPolicy returns the policy named s: "allow", "deny" or
// "local" ("" is the default).
func ParseStoreErrorPolicy(s string) (StoreErrorPolicy, error) {
	for i, n := range storeErrorPolicyNames {
		if n == s {
			return StoreErrorPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown store error policy %q (want allow, deny or local)", s)
}
