package rules

import (
	"math"
	"time"

	"github.com/bouncerhq/bouncer"
)

// ReportWindow is how much of a rule's traffic one report may charge by
// default: what its limits admit in this long, or twice the largest
// limit's capacity when that is more (see Rule.MaxReport).
const ReportWindow = time.Minute

// reportBound is the most one report may charge a descriptor of m:
// its rule's MaxReport, or by default what the limits m is judged by
// admit in ReportWindow, or twice the largest one's capacity when that is
// more (a report may empty a full limit and owe one more), at least 1 and
// at most MaxHits.
func (m *matched) reportBound() int64 {
	if m.rule != nil && m.rule.MaxReport > 0 {
		return m.rule.MaxReport
	}
	if m.shared {
		return windowBound([]bouncer.Limit{{Algorithm: bouncer.FixedWindow, Rate: int64(m.report.RequestsPerUnit), Period: m.report.Unit.Duration()}})
	}
	return windowBound(m.limits)
}

// windowBound is the default report bound of a key counted under ls.
func windowBound(ls []bouncer.Limit) int64 {
	n := int64(1)
	for _, l := range ls {
		if l.Period <= 0 {
			continue
		}
		perWindow := math.Ceil(float64(l.Rate) * float64(ReportWindow) / float64(l.Period))
		n = max(n, 2*l.Capacity(), int64(min(perWindow, MaxHits)))
	}
	return min(n, MaxHits)
}
