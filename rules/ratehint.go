package rules

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
)

// rateWithPeriod matches a rate written with its period in one value, as
// other tools write it: "10/s", "10/m", "100/5m", "10 per second",
// "10 r/s", "10 requests per minute", "10rps".
var rateWithPeriod = regexp.MustCompile(`^(\d+)\s*(?:(?:r|reqs?|requests?)\s*)?(?:/|per\s|an?\s)\s*(\d*)\s*([a-z]+)$|^(\d+)\s*([rq]p[smhd])$`)

// periodWords are the units a rateWithPeriod may name.
var periodWords = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// rateHint returns how to write value, a rate with its period in one
// string, as a rate and a period ("write rate: 10, period: 1s"), or ""
// if value is not one.
func rateHint(value string) string {
	m := rateWithPeriod.FindStringSubmatch(strings.ToLower(strings.TrimSpace(value)))
	if m == nil {
		return ""
	}
	n, count, unit := m[1], m[2], m[3]
	if m[4] != "" { // 10rps: r or q, p(er), then the unit's letter
		n, unit = m[4], m[5][2:]
	}
	per, ok := periodWords[unit]
	if !ok {
		return ""
	}
	if count != "" {
		k, err := strconv.ParseInt(count, 10, 64)
		if err != nil || k < 1 || k > int64(bouncer.MaxPeriod/per) {
			return ""
		}
		per *= time.Duration(k)
	}
	return fmt.Sprintf("write rate: %s, period: %s", n, periodName(per))
}
