package fairshare

import (
	"math"
	"slices"
)

// Level divides capacity among demands and returns the water level of the
// division and what its shares use: each demand's share is
// min(demand, level), a demand not above 0 (NaN included) counting as
// 0, and the shares add up to used, at most
// capacity. It sorts demands in place.
func Level(capacity float64, demands []float64) (level, used float64) {
	slices.Sort(demands)
	left := positive(capacity)
	for k, d := range demands {
		d = positive(d)
		rest := float64(len(demands) - k)
		if equal := left / rest; d >= equal {
			return equal, used + equal*rest
		}
		left -= d
		used += d
	}
	return math.Inf(1), used
}

// Shares returns each demand's share of capacity, in the order of
// demands, which it leaves as they are. It is shorthand for Level on a
// copy of demands.
func Shares(capacity float64, demands []float64) []float64 {
	shares := slices.Clone(demands)
	level, _ := Level(capacity, shares)
	for i, d := range demands {
		shares[i] = min(positive(d), level)
	}
	return shares
}

// positive is x, or 0 when x is not above 0: negative, or NaN (which
// would otherwise make every share NaN).
func positive(x float64) float64 {
	if x > 0 {
		return x
	}
	return 0
}
