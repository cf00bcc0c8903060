package calendar

import (
	"math/rand/v2"
	"testing"
	"time"
	_ "time/tzdata" // the zones, whatever the machine has
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func at(t *testing.T, loc *time.Location, s string) time.Time {
	t.Helper()
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Windows at fixed instants: their bounds in local time and their length.
func TestWindow(t *testing.T) {
	ny := zone(t, "America/New_York")
	tests := []struct {
		name        string
		p           Period
		loc         *time.Location
		t           string
		start, end  string
		hoursLength float64
	}{
		{"day, UTC", Period{Unit: Day}, time.UTC, "2026-03-05 10:00", "2026-03-05 00:00", "2026-03-06 00:00", 24},
		{"day, daylight saving time starts (23 h)", Period{Unit: Day, Zone: "America/New_York"}, ny, "2026-03-08 12:00", "2026-03-08 00:00", "2026-03-09 00:00", 23},
		{"day, daylight saving time ends (25 h)", Period{Unit: Day, Zone: "America/New_York"}, ny, "2026-11-01 23:59", "2026-11-01 00:00", "2026-11-02 00:00", 25},
		{"day, the last instant before midnight", Period{Unit: Day, Zone: "America/New_York"}, ny, "2026-11-01 23:59", "2026-11-01 00:00", "2026-11-02 00:00", 25},
		{"month of 31 days", Period{Unit: Month, Zone: "America/New_York"}, ny, "2026-01-31 23:59", "2026-01-01 00:00", "2026-02-01 00:00", 31 * 24},
		{"month of 28 days", Period{Unit: Month, Zone: "America/New_York"}, ny, "2026-02-14 08:00", "2026-02-01 00:00", "2026-03-01 00:00", 28 * 24},
		{"month of 29 days (2028)", Period{Unit: Month, Zone: "America/New_York"}, ny, "2028-02-29 08:00", "2028-02-01 00:00", "2028-03-01 00:00", 29 * 24},
		{"month of 30 days", Period{Unit: Month, Zone: "America/New_York"}, ny, "2026-04-01 00:00", "2026-04-01 00:00", "2026-05-01 00:00", 30 * 24},
		{"month, daylight saving time starts", Period{Unit: Month, Zone: "America/New_York"}, ny, "2026-03-20 00:00", "2026-03-01 00:00", "2026-04-01 00:00", 31*24 - 1},
		{"month, daylight saving time ends", Period{Unit: Month, Zone: "America/New_York"}, ny, "2026-11-20 00:00", "2026-11-01 00:00", "2026-12-01 00:00", 30*24 + 1},
		{"year end", Period{Unit: Month, Zone: "America/New_York"}, ny, "2026-12-31 23:59", "2026-12-01 00:00", "2027-01-01 00:00", 31 * 24},
		{"anchor 15, before it", Period{Unit: Month, Zone: "America/New_York", Anchor: 15}, ny, "2026-03-10 00:00", "2026-02-15 00:00", "2026-03-15 00:00", 28*24 - 1},
		{"anchor 31, in January", Period{Unit: Month, Anchor: 31}, time.UTC, "2026-02-15 00:00", "2026-01-31 00:00", "2026-02-28 00:00", 28 * 24},
		{"anchor 31, February's window on the 28th", Period{Unit: Month, Anchor: 31}, time.UTC, "2026-03-30 00:00", "2026-02-28 00:00", "2026-03-31 00:00", 31 * 24},
		{"anchor 31, April's on the 30th", Period{Unit: Month, Anchor: 31}, time.UTC, "2026-05-01 00:00", "2026-04-30 00:00", "2026-05-31 00:00", 31 * 24},
		{"anchor 31, a leap year", Period{Unit: Month, Anchor: 31}, time.UTC, "2028-02-29 00:00", "2028-02-29 00:00", "2028-03-31 00:00", 31 * 24},
		{"anchor 31, over the year end", Period{Unit: Month, Anchor: 31}, time.UTC, "2027-01-15 00:00", "2026-12-31 00:00", "2027-01-31 00:00", 31 * 24},
		{"week from Monday", Period{Unit: Week, Zone: "America/New_York"}, ny, "2026-03-04 12:00", "2026-03-02 00:00", "2026-03-09 00:00", 7*24 - 1},
		{"week from Sunday", Period{Unit: Week, Zone: "America/New_York", Anchor: 7}, ny, "2026-03-04 12:00", "2026-03-01 00:00", "2026-03-08 00:00", 7 * 24},
		{"week, on its first day", Period{Unit: Week, Zone: "America/New_York", Anchor: 3}, ny, "2026-03-04 00:00", "2026-03-04 00:00", "2026-03-11 00:00", 7*24 - 1},
		{"week over the year end", Period{Unit: Week}, time.UTC, "2027-01-01 00:00", "2026-12-28 00:00", "2027-01-04 00:00", 7 * 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := tt.p.Window(at(t, tt.loc, tt.t))
			if want := at(t, tt.loc, tt.start); !start.Equal(want) {
				t.Errorf("start %v, want %v", start, want)
			}
			if want := at(t, tt.loc, tt.end); !end.Equal(want) {
				t.Errorf("end %v, want %v", end, want)
			}
			if got := end.Sub(start).Hours(); got != tt.hoursLength {
				t.Errorf("%v long, want %v hours", end.Sub(start), tt.hoursLength)
			}
		})
	}
}

// In a zone whose clocks skip midnight (Beirut starts daylight saving time
// at 00:00 on the last Sunday of March), the day starts where they resume.
func TestWindowSkippedMidnight(t *testing.T) {
	beirut := zone(t, "Asia/Beirut")
	start, end := Period{Unit: Day, Zone: "Asia/Beirut"}.Window(time.Date(2026, 3, 29, 12, 0, 0, 0, beirut))
	if got := start.Format("2006-01-02 15:04 -0700"); got != "2026-03-29 01:00 +0300" {
		t.Errorf("start %s, want 2026-03-29 01:00 +0300", got)
	}
	if got := end.Sub(start); got != 23*time.Hour {
		t.Errorf("the day is %v long, want 23h", got)
	}
	_, before := Period{Unit: Day, Zone: "Asia/Beirut"}.Window(start.Add(-time.Nanosecond))
	if !before.Equal(start) {
		t.Errorf("the day before ends at %v, want %v", before, start)
	}
}

// For any instant, in several zones and with every anchor, the window
// holds it, starts on the day it should at the first instant of that
// day, ends where the next window starts, and the instant before its
// start is in the window before.
func TestWindowProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	zones := []string{"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Beirut", "America/Santiago", "Pacific/Chatham", "Asia/Kolkata"}
	lo, hi := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, name := range zones {
		loc := zone(t, name)
		for i := range 3000 {
			p := Period{Unit: Unit(1 + i%3), Zone: name}
			switch p.Unit {
			case Week:
				p.Anchor = rng.IntN(8)
			case Month:
				p.Anchor = rng.IntN(32)
			}
			ts := time.Unix(0, lo+rng.Int64N(hi-lo))
			start, end := p.Window(ts)
			if start.After(ts) || !ts.Before(end) {
				t.Fatalf("%s %+v at %v: window [%v, %v) does not hold it", name, p, ts, start, end)
			}
			if s2, e2 := p.Window(start); !s2.Equal(start) || !e2.Equal(end) {
				t.Fatalf("%s %+v: the window of its start %v is [%v, %v), want [%v, %v)", name, p, start, s2, e2, start, end)
			}
			if s3, _ := p.Window(end); !s3.Equal(end) {
				t.Fatalf("%s %+v: the window after [%v, %v) starts at %v", name, p, start, end, s3)
			}
			if _, e4 := p.Window(start.Add(-time.Nanosecond)); !e4.Equal(start) {
				t.Fatalf("%s %+v: the window before %v ends at %v", name, p, start, e4)
			}
			if sameDay(start.Add(-time.Nanosecond), start.In(loc)) {
				t.Fatalf("%s %+v: %v is not the first instant of its day", name, p, start)
			}
			y, m, d := start.In(loc).Date()
			switch p.Unit {
			case Week:
				want := time.Monday
				if p.Anchor > 0 {
					want = time.Weekday(p.Anchor % 7)
				}
				if wd := start.In(loc).Weekday(); wd != want {
					t.Fatalf("%s %+v: the week starts on a %v, want %v", name, p, wd, want)
				}
			case Month:
				if want := min(max(p.Anchor, 1), daysIn(y, m)); d != want {
					t.Fatalf("%s %+v: the month starts on day %d, want %d", name, p, d, want)
				}
			}
			if n := end.Sub(start); n < p.Shortest() || n > p.Longest() {
				t.Fatalf("%s %+v: a window %v long, outside [%v, %v]", name, p, n, p.Shortest(), p.Longest())
			}
		}
	}
}

func TestParseAndValidate(t *testing.T) {
	for _, u := range []Unit{Day, Week, Month} {
		got, err := ParseUnit(u.String())
		if err != nil || got != u {
			t.Errorf("ParseUnit(%q) = %v, %v", u.String(), got, err)
		}
	}
	if _, err := ParseUnit("calendar_year"); err == nil {
		t.Error("ParseUnit(calendar_year): no error")
	}
	for _, p := range []Period{{Unit: Day, Anchor: 1}, {Unit: Week, Anchor: 8}, {Unit: Month, Anchor: 32}, {Unit: Month, Anchor: -1}, {},
		{Unit: Day, Zone: "Local"}, {Unit: Day, Zone: "Mars/Olympus_Mons"}, {Unit: Day, Zone: "../../etc/passwd"}} {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
	for _, p := range []Period{{Unit: Day}, {Unit: Week, Anchor: 7}, {Unit: Month, Anchor: 31}} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

// TestWindows checks that the kept window answers as Window does, in
// order, out of order and across window ends.
func TestWindows(t *testing.T) {
	p := Period{Unit: Day, Zone: "America/New_York"}
	w := NewWindows(p)
	if w.Period() != p {
		t.Fatalf("Period() = %+v", w.Period())
	}
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := range 5000 {
		ts := base + int64(i)*int64(10*time.Minute) // forward, through a clock change
		if i%3 == 0 {
			ts = base + rng.Int64N(int64(60*24*time.Hour)) // anywhere in two months
		}
		s, e := w.At(ts)
		ws, we := p.Window(time.Unix(0, ts))
		if s != ws.UnixNano() || e != we.UnixNano() {
			t.Fatalf("At(%v) = [%v, %v), Window says [%v, %v)", time.Unix(0, ts), time.Unix(0, s), time.Unix(0, e), ws, we)
		}
	}
}

func BenchmarkWindows(b *testing.B) {
	w := NewWindows(Period{Unit: Month, Zone: "America/New_York", Anchor: 15})
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC).UnixNano()
	for b.Loop() {
		w.At(now)
	}
}

func BenchmarkWindow(b *testing.B) {
	p := Period{Unit: Month, Zone: "America/New_York", Anchor: 15}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for b.Loop() {
		p.Window(now)
	}
}
