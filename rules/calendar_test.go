package rules_test

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/calendar"
	"github.com/bouncerhq/bouncer/rules"
)

// A calendar month in a time zone from a rules file: a fixed window by
// default, named after its period, resetting at the month's end in New
// York; a caller's billing_day entry starts its own months on that day,
// its time_zone entry puts them in its zone; neither is part of the key
// counted.
func TestCalendarRule(t *testing.T) {
	e, clock := newEngine(t, "testdata/calendar.yaml")
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	r := e.Config().Domain("billing").Rules[0]
	want := calendar.Period{Unit: calendar.Month, Zone: "America/New_York"}
	if l := r.Limits[0]; l.Algorithm != bouncer.FixedWindow || l.Calendar != want || l.Name != "3_per_calendar_month" || l.Period != want.Longest() {
		t.Fatalf("the rule's limit is %v, want a fixed window of %v named 3_per_calendar_month", l, want)
	}
	now := clock.Now()
	for _, c := range []struct {
		name string
		d    rules.Descriptor
		end  time.Time
	}{
		{"from the 1st", desc("api_key=a"), time.Date(2026, 2, 1, 0, 0, 0, 0, ny)},
		{"from the 15th", desc("api_key=b", "billing_day=15"), time.Date(2026, 1, 15, 0, 0, 0, 0, ny)},
		{"from the 31st", desc("api_key=c", "billing_day=31"), time.Date(2026, 1, 31, 0, 0, 0, 0, ny)},
		{"not a day: the rule's anchor", desc("api_key=d", "billing_day=thirty"), time.Date(2026, 2, 1, 0, 0, 0, 0, ny)},
		{"in Tokyo's zone", desc("api_key=e", "time_zone=Asia/Tokyo"), time.Date(2026, 2, 1, 0, 0, 0, 0, tokyo)},
		{"in Tokyo from the 6th", desc("api_key=f", "time_zone=Asia/Tokyo", "billing_day=6"), time.Date(2026, 1, 6, 0, 0, 0, 0, tokyo)},
		{"not a zone: the rule's", desc("api_key=g", "time_zone=Mars/Olympus"), time.Date(2026, 2, 1, 0, 0, 0, 0, ny)},
	} {
		for i := range 3 {
			if resp := decide(t, e, "billing", c.d); resp.Code != rules.OK || resp.Statuses[0].Remaining != uint32(2-i) {
				t.Fatalf("%s: request %d: %s", c.name, i+1, codes(resp))
			}
		}
		resp := decide(t, e, "billing", c.d)
		st := resp.Statuses[0]
		if resp.Code != rules.OverLimit || st.RetryAfter != c.end.Sub(now) || st.ResetAfter != c.end.Sub(now) {
			t.Errorf("%s: the 4th request: %s, retry after %v, reset after %v; want over the limit until %v (%v)", c.name, codes(resp), st.RetryAfter, st.ResetAfter, c.end, c.end.Sub(now))
		}
	}
	// On the 15th b's cycle renews; a's month goes on.
	clock.Set(time.Date(2026, 1, 15, 0, 0, 0, 0, ny))
	if resp := decide(t, e, "billing", desc("api_key=b", "billing_day=15")); resp.Code != rules.OK || resp.Statuses[0].Remaining != 2 {
		t.Errorf("b's cycle from the 15th renewed: %s", codes(resp))
	}
	if resp := decide(t, e, "billing", desc("api_key=a")); resp.Code != rules.OverLimit {
		t.Errorf("a's month from the 1st goes on until February: %s", codes(resp))
	}
}
