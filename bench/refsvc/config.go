package refsvc

import (
	"fmt"
	"strings"
	"time"
)

// LimitConfig returns a configuration in envoyproxy/ratelimit's format
// (which `bouncer serve` reads too) that holds every value of descriptor
// key, in domain, to requestsPerUnit per unit ("second", "minute", "hour"
// or "day").
func LimitConfig(domain, key string, requestsPerUnit int64, unit string) string {
	return fmt.Sprintf(`domain: %s
descriptors:
  - key: %s
    rate_limit:
      unit: %s
      requests_per_unit: %d
`, domain, key, unit, requestsPerUnit)
}

// UnitPeriod returns the length of a unit of envoyproxy/ratelimit's
// configuration, and whether there is such a unit.
func UnitPeriod(unit string) (time.Duration, bool) {
	switch strings.ToLower(unit) {
	case "second":
		return time.Second, true
	case "minute":
		return time.Minute, true
	case "hour":
		return time.Hour, true
	case "day":
		return 24 * time.Hour, true
	}
	return 0, false
}
