package bouncer

import "fmt"

// Mode says how a limit shared by many instances is decided when a
// hybrid limiter (package hybrid) stands in front of the shared store.
// The stores themselves ignore it: a limit's Mode is not part of its
// identity, and every store decides every check the same way whatever
// its Mode.
type Mode uint8

const (
	// Strict decides every check in the shared store: exact, one round
	// trip each. It is the zero value and the default.
	Strict Mode = iota
	// Lease takes quota from the shared store in leases and spends it
	// locally. The shared store never counts more than the limit, so no
	// fixed window admits more than its rate; a bucket admits at most
	// rate × lease time more than it would alone. The sliding windows
	// cannot lease.
	Lease
	// Async decides locally on a view of the shared count and pushes
	// each instance's usage to the shared store in batches. It admits
	// more than the limit by at most (instances − 1) × what one instance
	// can admit in one sync interval.
	Async
)

var modeNames = [...]string{"strict", "lease", "async"}

// String returns the mode's configuration name.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Valid reports whether m is one of the modes above.
func (m Mode) Valid() bool { return m <= Async }

// ParseMode returns the mode named s: "strict", "lease" or "async" (""
// is Strict).
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return Strict, nil
	}
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q (want strict, lease or async)", s)
}
