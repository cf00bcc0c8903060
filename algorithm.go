package bouncer

import "fmt"

// Algorithm names how a limit decides. The zero value is invalid.
type Algorithm uint8

// The algorithms. docs/algorithms.md compares them; package algo gives each
// one's formula.
const (
	// TokenBucket holds up to Burst tokens and refills Rate tokens per
	// Period, continuously. A check of cost n takes n tokens.
	TokenBucket Algorithm = iota + 1
	// GCRA decides exactly as TokenBucket, stored as one theoretical
	// arrival time.
	GCRA
	// LeakyBucket drains Rate units per Period from a bucket Burst units
	// deep. With Shape unset it polices (overflow is denied); with Shape
	// set it admits with a Delay so that units leave at a steady rate.
	LeakyBucket
	// FixedWindow counts up to Rate units per window of Period, windows
	// aligned to the Unix epoch. Up to 2×Rate can pass around a boundary.
	FixedWindow
	// SlidingWindowLog remembers every admitted unit for one Period: exact.
	SlidingWindowLog
	// SlidingWindowCounter weighs the previous window's count by the part
	// of it still inside the sliding window: prev×(1−elapsed/Period)+curr.
	SlidingWindowCounter
	// Concurrency allows at most Rate units in flight. A check takes
	// leases that a Refund releases; a lease not released expires after
	// Period.
	Concurrency
)

var algorithmNames = [...]string{
	TokenBucket:          "token_bucket",
	GCRA:                 "gcra",
	LeakyBucket:          "leaky_bucket",
	FixedWindow:          "fixed_window",
	SlidingWindowLog:     "sliding_window_log",
	SlidingWindowCounter: "sliding_window_counter",
	Concurrency:          "concurrency",
}

// Algorithms lists every valid algorithm, in declaration order.
func Algorithms() []Algorithm {
	return []Algorithm{TokenBucket, GCRA, LeakyBucket, FixedWindow, SlidingWindowLog, SlidingWindowCounter, Concurrency}
}

// String returns the algorithm's configuration name, such as "token_bucket".
func (a Algorithm) String() string {
	if a.Valid() {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// Valid reports whether a is one of the declared algorithms.
func (a Algorithm) Valid() bool { return a >= TokenBucket && a <= Concurrency }

// UsesBurst reports whether the algorithm takes a Burst: the bucket
// algorithms do, the window and concurrency algorithms do not.
func (a Algorithm) UsesBurst() bool { return a == TokenBucket || a == GCRA || a == LeakyBucket }

// ParseAlgorithm returns the algorithm with the configuration name s.
func ParseAlgorithm(s string) (Algorithm, error) {
	for _, a := range Algorithms() {
		if algorithmNames[a] == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("bouncer: unknown algorithm %q", s)
}

// MarshalText implements encoding.TextMarshaler.
func (a Algorithm) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("bouncer: invalid algorithm %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, err := ParseAlgorithm(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}
