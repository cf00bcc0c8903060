package algo

import "math/bits"

// floorDiv returns ⌊a/b⌋ for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// windowStart returns the start of the period-long window, aligned to the
// Unix epoch, that contains t.
func windowStart(t, period int64) int64 { return floorDiv(t, period) * period }

// mulDiv returns ⌊a×b/c⌋ computed in 128 bits, for a, b ≥ 0 and c > 0,
// saturating at limit when the quotient exceeds it.
func mulDiv(a, b, c, limit int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return limit
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > uint64(limit) {
		return limit
	}
	return int64(q)
}

// mulDivCeil returns ⌈a×b/c⌉ computed in 128 bits, for a, b ≥ 0 and c > 0,
// saturating at limit.
func mulDivCeil(a, b, c, limit int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return limit
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	if q > uint64(limit) {
		return limit
	}
	return int64(q)
}
