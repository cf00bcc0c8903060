package rules_test

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

// An override's count belongs to the descriptor's entries and window, not
// to the override's numbers, as in envoyproxy/ratelimit: a request that
// changes its override mid-window reads the same count against the new
// rate.
func TestOverrideChangeKeepsTheCount(t *testing.T) {
	type step struct {
		rate uint32
		hits uint64
		want string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"3 then 5 per minute", []step{
			{3, 1, "OK: OK/2"}, {3, 1, "OK: OK/1"}, {3, 1, "OK: OK/0"},
			{5, 1, "OK: OK/1"}, {5, 1, "OK: OK/0"}, {5, 1, "OVER_LIMIT: OVER_LIMIT/0"},
		}},
		{"5 then 3 per minute", []step{
			{5, 1, "OK: OK/4"}, {5, 1, "OK: OK/3"}, {5, 1, "OK: OK/2"},
			{3, 1, "OVER_LIMIT: OVER_LIMIT/0"},
		}},
		{"over-limit hits count", []step{
			{2, 3, "OVER_LIMIT: OVER_LIMIT/0"}, {4, 1, "OK: OK/0"}, {4, 1, "OVER_LIMIT: OVER_LIMIT/0"},
		}},
		{"a peek reads the count", []step{
			{3, 2, "OK: OK/1"}, {1, 0, "OVER_LIMIT: OVER_LIMIT/0"}, {2, 0, "OK: OK/0"}, {5, 0, "OK: OK/3"},
		}},
		{"zero counts too", []step{
			{0, 0, "OK: OK/0"}, {0, 2, "OVER_LIMIT: OVER_LIMIT/0"}, {3, 1, "OK: OK/0"}, {3, 1, "OVER_LIMIT: OVER_LIMIT/0"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t, "testdata/envoy.yaml")
			for i, s := range tt.steps {
				d := hits(desc("user_id=o"), s.hits)
				d.Limit = &rules.Override{RequestsPerUnit: s.rate, Unit: rules.UnitMinute}
				if got := codes(decide(t, e, "edge", d)); got != s.want {
					t.Errorf("step %d (%d per minute, %d hits): got %q, want %q", i, s.rate, s.hits, got, s.want)
				}
			}
		})
	}
}

// The shared count is per window: the next minute starts afresh whatever
// the override, and another unit counts apart.
func TestOverrideCountWindows(t *testing.T) {
	e, clock := newEngine(t, "testdata/envoy.yaml")
	over := func(rate uint32, u rules.Unit) rules.Descriptor {
		d := desc("user_id=w")
		d.Limit = &rules.Override{RequestsPerUnit: rate, Unit: u}
		return d
	}
	for range 3 {
		decide(t, e, "edge", over(3, rules.UnitMinute))
	}
	if got := codes(decide(t, e, "edge", over(3, rules.UnitHour))); got != "OK: OK/2" {
		t.Errorf("an hour override after a minute's hits: got %q, want OK/2", got)
	}
	if got := codes(decide(t, e, "edge", over(2, rules.UnitMinute))); got != "OVER_LIMIT: OVER_LIMIT/0" {
		t.Errorf("2 per minute after 3 hits: got %q, want OVER_LIMIT/0", got)
	}
	clock.Advance(time.Minute)
	if got := codes(decide(t, e, "edge", over(2, rules.UnitMinute))); got != "OK: OK/1" {
		t.Errorf("the next minute: got %q, want OK/1", got)
	}
}
