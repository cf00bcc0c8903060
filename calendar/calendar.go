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
	"strconv"
	"sync"
	"sync/atomic"
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

// Period is a calendar period in a time zone. The zero Period is none:
// a limit without a calendar. A Period is a comparable value; it names
// its zone, which Window loads once per process.
type Period struct {
	Unit Unit

	// Zone is the IANA time zone whose midnights the windows start at,
	// such as "America/New_York"; "" means UTC. "Local" is refused: the
	// instances sharing a limit must agree on its windows whatever their
	// machines' zones.
	Zone string

	// Anchor is where a window starts: for Month, the day of the month,
	// 1 to 31 (0 means 1), a month with fewer days starting on its last
	// day (an anchor of 31 starts February's window on the 28th or 29th);
	// for Week, the weekday, 1 (Monday) to 7 (Sunday) as ISO 8601 numbers
	// them (0 means Monday); Day takes none.
	Anchor int
}

// IsZero reports whether p is the zero Period: no calendar.
func (p Period) IsZero() bool { return p == Period{} }

// Validate reports what is wrong with p, or nil.
func (p Period) Validate() error {
	if p.Zone == "Local" {
		return errors.New(`calendar: the zone "Local" differs from machine to machine: name an IANA zone, such as America/New_York`)
	}
	if _, err := location(p.Zone); err != nil {
		return fmt.Errorf("calendar: unknown time zone %q: name an IANA zone, such as America/New_York or Europe/Paris", p.Zone)
	}
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
	loc, err := location(p.Zone)
	if err != nil {
		panic(fmt.Sprintf("calendar: Window of an invalid period: %+v", p))
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

// String writes p as a configuration would: "calendar_month
// America/New_York anchor 15".
func (p Period) String() string {
	s := p.Unit.String()
	if p.Zone != "" {
		s += " " + p.Zone
	}
	if p.Anchor != 0 {
		s += " anchor " + strconv.Itoa(p.Anchor)
	}
	return s
}

// Longest is the longest window p can have: a day, week or month of the
// most days, with two hours to spare for a zone's clock change (the
// largest moves clocks by two hours, most by one).
func (p Period) Longest() time.Duration {
	return time.Duration(p.days(31))*24*time.Hour + 2*time.Hour
}

// Shortest is the shortest window p can have: a day, week or month of
// the fewest days, less two hours for a zone's clock change.
func (p Period) Shortest() time.Duration {
	return time.Duration(p.days(28))*24*time.Hour - 2*time.Hour
}

// days is the days of p's unit, a month of month days.
func (p Period) days(month int) int {
	switch p.Unit {
	case Week:
		return 7
	case Month:
		return month
	}
	return 1
}

// zones holds the time zones loaded, by name: loading reads a file.
var zones sync.Map // string → *time.Location

func location(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if v, ok := zones.Load(name); ok {
		return v.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	v, _ := zones.LoadOrStore(name, loc)
	return v.(*time.Location), nil
}

// Windows is a Period with the window it found last kept, so that the
// checks of a limit find their window in a few nanoseconds instead of
// working it out from the zone's rules. It is safe for concurrent use.
type Windows struct {
	p   Period
	cur atomic.Pointer[[2]int64]
}

// NewWindows returns p's Windows. p must be valid.
func NewWindows(p Period) *Windows { return &Windows{p: p} }

// Period returns the period w finds the windows of.
func (w *Windows) Period() Period { return w.p }

// At returns the window that holds now, in Unix nanoseconds: start <=
// now < end. It keeps the latest window it has found.
func (w *Windows) At(now int64) (start, end int64) {
	c := w.cur.Load()
	if c != nil && c[0] <= now && now < c[1] {
		return c[0], c[1]
	}
	start, end = w.find(now)
	if c == nil || start > c[0] {
		w.cur.Store(&[2]int64{start, end})
	}
	return start, end
}

// Of is At for any instant, such as a stored state's: it uses the window
// kept, but keeps none of its own, so that an instant far from now does
// not displace now's window.
func (w *Windows) Of(t int64) (start, end int64) {
	if c := w.cur.Load(); c != nil && c[0] <= t && t < c[1] {
		return c[0], c[1]
	}
	return w.find(t)
}

func (w *Windows) find(t int64) (start, end int64) {
	s, e := w.p.Window(time.Unix(0, t))
	return s.UnixNano(), e.UnixNano()
}
