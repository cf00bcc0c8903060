// Package calendar computes the windows of calendar periods: days, weeks
// and months in a named time zone, each optionally anchored (a billing
// cycle that starts on the 15th, a week that starts on Sunday).
//
// A window starts at local midnight of its first day and ends where the
// next starts, so its length follows the zone's clock: a day is 23 or 25
// hours long on the days daylight saving time starts and ends, a month
// 28 to 31 days. The stores count a calendar limit in these windows; the
// boundaries are computed here, in Go, because Redis's Lua has no time
// zone database.
package calendar

import (
	"errors"
	"fmt"
	"time"
)

// Unit is the length of a calendar period.
type Unit int

const (
	Day Unit = iota + 1
	Week
	Month
)

var unitNames = map[Unit]string{Day: "calendar_day", Week: "calendar_week", Month: "calendar_month"}

func (u Unit) String() string {
	if s, ok := unitNames[u]; ok {
		return s
	}
	return fmt.Sprintf("calendar.Unit(%d)", int(u))
}

// ParseUnit returns the unit of a configuration name: calendar_day,
// calendar_week or calendar_month.
func ParseUnit(s string) (Unit, error) {
	for u, name := range unitNames {
		if name == s {
			return u, nil
		}
	}
	return 0, fmt.Errorf("calendar: unknown period %q (want calendar_day, calendar_week or calendar_month)", s)
}

// Period is a calendar period in a time zone.
type Period struct {
	Unit Unit

	// Location is the time zone whose midnights the windows start at;
	// nil means UTC.
	Location *time.Location

	// Anchor is where a window starts: for Month, the day of the month,
	// 1 to 31 (0 means 1), a month with fewer days starting on its last
	// day (an anchor of 31 starts February's window on the 28th or 29th);
	// for Week, the weekday, 1 (Monday) to 7 (Sunday) as ISO 8601 numbers
	// them (0 means Monday); Day takes none.
	Anchor int
}

// Validate reports what is wrong with p, or nil.
func (p Period) Validate() error {
	switch p.Unit {
	case Day:
		if p.Anchor != 0 {
			return errors.New("calendar: a calendar_day takes no anchor")
		}
	case Week:
		if p.Anchor < 0 || p.Anchor > 7 {
			return fmt.Errorf("calendar: a calendar_week's anchor is a weekday, 1 (Monday) to 7 (Sunday), got %d", p.Anchor)
		}
	case Month:
		if p.Anchor < 0 || p.Anchor > 31 {
			return fmt.Errorf("calendar: a calendar_month's anchor is a day of the month, 1 to 31, got %d", p.Anchor)
		}
	default:
		return fmt.Errorf("calendar: unknown unit %d", int(p.Unit))
	}
	return nil
}

// Window returns the window of p that holds t: start <= t < end.
func (p Period) Window(t time.Time) (start, end time.Time) {
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	local := t.In(loc)
	y, m, d := local.Date()
	switch p.Unit {
	case Day:
		start = midnight(y, m, d, loc)
		if start.After(t) { // a zone whose clocks went back over midnight
			start = midnight(y, m, d-1, loc)
		}
		return start, p.next(start)
	case Week:
		first := time.Monday
		if p.Anchor > 0 {
			first = time.Weekday(p.Anchor % 7)
		}
		back := (int(local.Weekday()) - int(first) + 7) % 7
		start = midnight(y, m, d-back, loc)
		if start.After(t) {
			start = midnight(y, m, d-back-7, loc)
		}
		return start, p.next(start)
	case Month:
		start = p.monthStart(y, m, loc)
		if start.After(t) {
			start = p.monthStart(y, m-1, loc)
		}
		return start, p.next(start)
	}
	panic(fmt.Sprintf("calendar: Window of an invalid period: %+v", p))
}

// next is the start of the window after the one that starts at start.
func (p Period) next(start time.Time) time.Time {
	y, m, d := start.Date()
	switch p.Unit {
	case Day:
		return midnight(y, m, d+1, start.Location())
	case Week:
		return midnight(y, m, d+7, start.Location())
	}
	return p.monthStart(y, m+1, start.Location())
}

// monthStart is the start of month m's window (m may be out of 1-12, as
// time.Date takes it).
func (p Period) monthStart(y int, m time.Month, loc *time.Location) time.Time {
	first := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) // normalizes y, m
	y, m = first.Year(), first.Month()
	return midnight(y, m, p.anchorDay(y, m), loc)
}

// anchorDay is the day of month m of year y that p's window starts on.
func (p Period) anchorDay(y int, m time.Month) int {
	day := max(p.Anchor, 1)
	return min(day, daysIn(y, m))
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// midnight is the start of day d of month m of year y in loc (d and m
// out of range normalize as time.Date has it): the first instant whose
// date in loc is that day. Where the zone's clocks skip midnight (a few
// zones start daylight saving time at 00:00), the day starts where they
// resume.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	noon := time.Date(y, m, d, 12, 0, 0, 0, loc) // never in a gap: its date is the day's
	if sameDay(t, noon) {
		return t
	}
	// Midnight was skipped and time.Date gave an instant of the day
	// before: the day starts at the first instant after it on the day.
	lo, hi := t, noon
	for hi.Sub(lo) > 1 {
		mid := lo.Add(hi.Sub(lo) / 2)
		if sameDay(mid, noon) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func sameDay(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd
}
