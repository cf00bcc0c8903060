package storetest

import (
	"fmt"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/calendar"
)

// calendarLimit is a fixed window of rate units per p.
func calendarLimit(name string, rate int64, p calendar.Period) bouncer.Limit {
	return bouncer.Limit{Name: name, Algorithm: bouncer.FixedWindow, Rate: rate, Period: p.Longest(), Calendar: p}
}

// on returns the offset from Start of a wall clock time in zone,
// "2006-01-02 15:04:05".
func on(zone, wall string) time.Duration {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		panic(fmt.Sprintf("storetest: zone %q: %v", zone, err))
	}
	t, err := time.ParseInLocation(time.DateTime, wall, loc)
	if err != nil {
		panic(fmt.Sprintf("storetest: %q: %v", wall, err))
	}
	return t.Sub(Start)
}

const (
	h = time.Hour
	d = 24 * time.Hour
)

// calendarScenarios are fixed windows of calendar days, weeks and months:
// clock changes both ways, months of 28 to 31 days, a year's end, an
// anchor on the 31st. Each reset is the true end of the window in its
// zone.
func calendarScenarios() []Scenario {
	ny := "America/New_York"
	day := calendarLimit("day", 3, calendar.Period{Unit: calendar.Day, Zone: ny})
	utcMonth := calendarLimit("month", 5, calendar.Period{Unit: calendar.Month})
	nyMonth := calendarLimit("month", 5, calendar.Period{Unit: calendar.Month, Zone: ny})
	tokyo := calendarLimit("month", 5, calendar.Period{Unit: calendar.Month, Zone: "Asia/Tokyo"})
	anchored := calendarLimit("cycle", 5, calendar.Period{Unit: calendar.Month, Anchor: 31})
	week := calendarLimit("week", 3, calendar.Period{Unit: calendar.Week, Zone: "Europe/London", Anchor: 7})
	charged := calendarLimit("day", 2, calendar.Period{Unit: calendar.Day})
	charged.ChargeDenied = true

	dst := on(ny, "2026-03-07 23:00:00")
	back := on(ny, "2026-11-01 00:00:00")
	jan := on("UTC", "2027-01-31 12:00:00")
	eve := on("Asia/Tokyo", "2026-12-31 23:59:59")
	a31 := on("UTC", "2027-01-31 00:00:00")
	mar := on(ny, "2026-03-01 00:00:00")
	nov := on(ny, "2026-11-01 00:00:00")
	sat := on("Europe/London", "2026-03-28 23:00:00")
	jun := on("UTC", "2026-06-01 23:00:00")
	return []Scenario{
		{Name: "fixed_window/calendar_day_clocks_go_forward", Limit: day, Steps: []Step{
			allow(dst, 2, 1, h), // the day ends at midnight, in an hour
			deny(dst+30*time.Minute, 2, 1, 30*time.Minute, 30*time.Minute),
			allow(dst+h, 3, 0, 23*h), // 8 March 2026: 23 hours long
			deny(dst+h+22*h, 1, 0, h, h),
			allow(dst+24*h, 1, 2, 24*h),
		}},
		{Name: "fixed_window/calendar_day_clocks_go_back", Limit: day, Steps: []Step{
			allow(back, 3, 0, 25*h), // 1 November 2026: 25 hours long
			deny(back+24*h, 1, 0, h, h),
			allow(back+25*h, 1, 2, 24*h),
		}},
		{Name: "fixed_window/calendar_month_lengths", Limit: utcMonth, Steps: []Step{
			allow(jan, 5, 0, 12*h),
			deny(jan+12*h-s, 1, 0, s, s),
			allow(jan+12*h, 1, 4, 28*d), // February 2027
			allow(jan+12*h+28*d, 1, 4, 31*d),
			allow(jan+12*h+59*d, 1, 4, 30*d),
			allow(on("UTC", "2028-02-01 00:00:00"), 1, 4, 29*d), // a leap year's February
		}},
		{Name: "fixed_window/calendar_month_year_end", Limit: tokyo, Steps: []Step{
			allow(eve, 5, 0, s),
			deny(eve, 1, 0, s, s),
			allow(eve+s, 5, 0, 31*d), // January in Tokyo
		}},
		{Name: "fixed_window/calendar_month_anchor_31", Limit: anchored, Steps: []Step{
			allow(a31-h, 5, 0, h),  // 31 December to 31 January
			allow(a31, 2, 3, 28*d), // to 28 February: the 31st, or the month's last day
			deny(a31+28*d-s, 4, 3, s, s),
			allow(a31+28*d, 5, 0, 31*d), // to 31 March
			allow(a31+59*d, 1, 4, 30*d), // to 30 April
			allow(a31+89*d, 1, 4, 31*d), // to 31 May
		}},
		{Name: "fixed_window/calendar_month_clock_changes", Limit: nyMonth, Steps: []Step{
			allow(mar, 1, 4, 31*d-h), // March loses an hour
			refund(mar+h, 1),
			allow(mar+h, 0, 5, 0),
			allow(nov, 5, 0, 30*d+h), // November gains one
			deny(nov, 1, 0, 30*d+h, 30*d+h),
		}},
		{Name: "fixed_window/calendar_week_from_sunday", Limit: week, Steps: []Step{
			allow(sat, 3, 0, h),
			allow(sat+h, 3, 0, 7*d-h), // the week British Summer Time starts in
			deny(sat+7*d-h, 1, 0, h, h),
			allow(sat+7*d, 1, 2, 7*d),
		}},
		{Name: "fixed_window/calendar_day_charge_denied", Limit: charged, Steps: []Step{
			allow(jun, 2, 0, h),
			deny(jun, 1, 0, h, h), // charged: over
			deny(jun+time.Minute, 0, 0, 59*time.Minute, 59*time.Minute),
			allow(jun+h, 0, 2, 0),
			allow(jun+h, 1, 1, d),
		}},
	}
}
