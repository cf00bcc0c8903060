package simulate

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

// arrival is one request of a traffic pattern: cost units at offset at from
// the start of the simulation.
type arrival struct {
	at   time.Duration
	cost int64
}

// maxRequests bounds the requests of one simulation, so that no flag can
// make it run out of memory.
const maxRequests = 1_000_000

// steadyTraffic returns requests spaced evenly at rps per second, the first
// at 0 and the i-th at ⌊i × 1s / rps⌋, every one before duration. rps is
// exact (a rational), so that no spacing drifts.
func steadyTraffic(rps *big.Rat, duration time.Duration, cost int64) ([]arrival, error) {
	if rps.Sign() <= 0 {
		return nil, errors.New("--rps: must be positive")
	}
	// i × 1e9 / rps < duration ⇔ i < duration × rps / 1e9: the count is
	// the ceiling of that.
	n := new(big.Rat).Mul(big.NewRat(int64(duration), int64(time.Second)), rps)
	count := ceilRat(n)
	if !count.IsInt64() || count.Int64() > maxRequests {
		return nil, fmt.Errorf("--rps: %s per second for --duration %v is %s requests; at most %d", rps.RatString(), duration, count, maxRequests)
	}
	out := make([]arrival, count.Int64())
	// The i-th offset is ⌊i × 1e9 × den / num⌋.
	num, den := rps.Num(), rps.Denom()
	step := new(big.Int).Mul(big.NewInt(int64(time.Second)), den)
	var at, q big.Int
	for i := range out {
		at.Mul(step, big.NewInt(int64(i)))
		q.Quo(&at, num)
		out[i] = arrival{at: time.Duration(q.Int64()), cost: cost}
	}
	return out, nil
}

// burstTraffic returns size requests at once at 0, every, 2×every, ...,
// every instant before duration.
func burstTraffic(size int64, every, duration time.Duration, cost int64) ([]arrival, error) {
	switch {
	case size < 1:
		return nil, fmt.Errorf("--burst-size: must be at least 1, got %d", size)
	case every <= 0:
		return nil, fmt.Errorf("--every: must be positive, got %v", every)
	}
	bursts := (int64(duration) + int64(every) - 1) / int64(every)
	if size > maxRequests || bursts > maxRequests/size {
		return nil, fmt.Errorf("--burst-size: %d requests every %v for --duration %v is more than %d requests", size, every, duration, maxRequests)
	}
	out := make([]arrival, 0, bursts*size)
	for b := range bursts {
		for range size {
			out = append(out, arrival{at: time.Duration(b) * every, cost: cost})
		}
	}
	return out, nil
}

// boundarySpread is the fraction of a period over which the boundary attack
// sends each half of its requests.
const boundarySpread = 10

// boundaryAttack returns the window-edge attack on windows of period aligned
// to the Unix epoch, for a simulation starting at the Unix instant start:
// n requests evenly spread over the last tenth of a period before the first
// window boundary b (at b − period/10 + i×(period/10)/n), then n more over
// the first tenth after it (at b + i×(period/10)/n). A fixed window admits
// both halves; within any one period, only n should pass.
func boundaryAttack(start int64, period time.Duration, n int64, duration time.Duration, cost int64) ([]arrival, error) {
	if n < 1 || n > maxRequests/2 {
		return nil, fmt.Errorf("--rate: boundary traffic sends 2 × --rate requests; at most %d, got --rate %d", maxRequests, n)
	}
	p := int64(period)
	w := max(p/boundarySpread, 1)
	// b is the first boundary with room for the first half after start.
	b := (start + w + p - 1) / p * p
	first := time.Duration(b - w - start)
	if end := first + 2*time.Duration(w); end > duration {
		return nil, fmt.Errorf("--duration: boundary traffic runs until %v; --duration must be at least that, got %v", end, duration)
	}
	out := make([]arrival, 0, 2*n)
	for half := range int64(2) {
		for i := range n {
			// ⌊i×w/n⌋ without overflow: i < n, so the quotient fits.
			hi, lo := bits.Mul64(uint64(i), uint64(w))
			q, _ := bits.Div64(hi, lo, uint64(n))
			out = append(out, arrival{at: first + time.Duration(half*w) + time.Duration(q), cost: cost})
		}
	}
	return out, nil
}

// readTraffic parses a traffic file: one request per line, as an offset from
// the start and an optional cost (defaultCost when absent). An offset is a
// Go duration ("150ms", "1m30s") or plain seconds ("0.15", "2"). A "#"
// starts a comment; blank lines are skipped. Offsets need not be sorted.
// Every offset must be below maxAt. Errors name name:line.
func readTraffic(name string, r io.Reader, defaultCost int64, maxAt time.Duration) ([]arrival, error) {
	var out []arrival
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		a, err := parseArrival(fields, defaultCost, maxAt)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if len(out) == maxRequests {
			return nil, fmt.Errorf("%s:%d: more than %d requests", name, line, maxRequests)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	slices.SortStableFunc(out, func(a, b arrival) int { return cmp.Compare(a.at, b.at) })
	return out, nil
}

func parseArrival(fields []string, cost int64, maxAt time.Duration) (arrival, error) {
	if len(fields) > 2 {
		return arrival{}, fmt.Errorf("want a time and an optional cost, got %d fields", len(fields))
	}
	at, err := parseOffset(fields[0])
	if err != nil {
		return arrival{}, err
	}
	if at >= maxAt {
		return arrival{}, fmt.Errorf("time %v is not before %v", at, maxAt)
	}
	if len(fields) == 2 {
		cost, err = strconv.ParseInt(fields[1], 10, 64)
		if err != nil || cost < 0 || cost > maxCost {
			return arrival{}, fmt.Errorf("cost %q is not a whole number from 0 to %d", fields[1], int64(maxCost))
		}
	}
	return arrival{at: at, cost: cost}, nil
}

// maxOffsetLen bounds the text of one time, so that a line such as
// "1e99999" costs no more to parse than a plain one.
const maxOffsetLen = 40

// parseOffset parses a time from the start: a Go duration or plain seconds,
// rounded up to a whole nanosecond.
func parseOffset(s string) (time.Duration, error) {
	if len(s) > maxOffsetLen {
		return 0, fmt.Errorf("time %.10q... is longer than %d characters", s, maxOffsetLen)
	}
	var d time.Duration
	if secs, ok := new(big.Rat).SetString(s); ok && !strings.Contains(s, "/") {
		ns := ceilRat(new(big.Rat).Mul(secs, big.NewRat(int64(time.Second), 1)))
		if !ns.IsInt64() {
			return 0, fmt.Errorf("time %q is out of range", s)
		}
		d = time.Duration(ns.Int64())
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("time %q is neither a duration (150ms) nor seconds (0.15)", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("time %q is negative", s)
	}
	return d, nil
}

// ceilRat returns ⌈r⌉.
func ceilRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}
