package rules_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
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

// Under envoy semantics an override and a config rule on the same entries
// and unit share one count, as in envoyproxy/ratelimit, each reading it
// against its own rate, whatever the rule's name; another unit counts
// apart.
func TestOverrideSharesTheRuleCount(t *testing.T) {
	e, _ := newEngine(t, "testdata/envoy.yaml")
	over := func(d rules.Descriptor, rate uint32, u rules.Unit) rules.Descriptor {
		d.Limit = &rules.Override{RequestsPerUnit: rate, Unit: u}
		return d
	}
	steps := []struct {
		what string
		d    rules.Descriptor
		want string
	}{
		{"the rule, 3 per minute", hits(desc("user_id=s"), 2), "OK: OK/1"},
		{"an override of 5 per minute reads the rule's 2", over(desc("user_id=s"), 5, rules.UnitMinute), "OK: OK/2"},
		{"the rule reads the override's hit", desc("user_id=s"), "OVER_LIMIT: OVER_LIMIT/0"},
		{"an override of 6 reads the denied hit too", over(desc("user_id=s"), 6, rules.UnitMinute), "OK: OK/1"},
		{"an hour override counts apart", over(desc("user_id=s"), 2, rules.UnitHour), "OK: OK/1"},
		{"a named rule (acme, 5 an hour)", hits(desc("tenant=acme"), 4), "OK: OK/1"},
		{"an override of 5 an hour on acme", over(desc("tenant=acme"), 5, rules.UnitHour), "OK: OK/0"},
		{"acme after it", desc("tenant=acme"), "OVER_LIMIT: OVER_LIMIT/0"},
	}
	for _, s := range steps {
		if got := codes(decide(t, e, "edge", s.d)); got != s.want {
			t.Errorf("%s: got %q, want %q", s.what, got, s.want)
		}
	}
}

// A rule of 0 requests per unit shares its count too: a peek is OK while
// nothing was counted in the window, every hit is over, and an override
// on the same entries reads those hits.
func TestZeroRuleSharesItsCount(t *testing.T) {
	c, err := rules.Parse("zero.yaml", []byte("domain: z\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newEngine(t, "testdata/envoy.yaml")
	e.Swap(c)
	over := desc("k=v")
	over.Limit = &rules.Override{RequestsPerUnit: 3, Unit: rules.UnitMinute}
	for i, s := range []struct {
		d    rules.Descriptor
		want string
	}{
		{hits(desc("k=v"), 0), "OK: OK/0"},
		{over, "OK: OK/2"},
		{hits(desc("k=v"), 0), "OVER_LIMIT: OVER_LIMIT/0"},
		{desc("k=v"), "OVER_LIMIT: OVER_LIMIT/0"},
		{over, "OK: OK/0"},
	} {
		if got := codes(decide(t, e, "z", s.d)); got != s.want {
			t.Errorf("step %d: got %q, want %q", i, got, s.want)
		}
	}
}

// A reload that changes a rule's requests_per_unit keeps the window's
// count under envoy semantics, as envoyproxy/ratelimit does; in Bouncer's
// semantics the changed limit counts afresh.
func TestReloadKeepsTheEnvoyCount(t *testing.T) {
	cfg := func(semantics string, rate int) *rules.Config {
		t.Helper()
		body := fmt.Sprintf("domain: r\n%sdescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", semantics, rate)
		c, err := rules.Parse("r.yaml", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tt := range []struct{ semantics, want string }{
		{"", "OK: OK/1"},
		{"semantics: bouncer\n", "OK: OK/4"},
	} {
		e, _ := newEngine(t, "testdata/envoy.yaml")
		e.Swap(cfg(tt.semantics, 3))
		decide(t, e, "r", hits(desc("k=v"), 3))
		e.Swap(cfg(tt.semantics, 5))
		if got := codes(decide(t, e, "r", desc("k=v"))); got != tt.want {
			t.Errorf("%q: 3 hits at 3 per minute, one at 5 after a reload: got %q, want %q", tt.semantics, got, tt.want)
		}
	}
}

// Under a mode other than strict (--mode lease), a rule counts under its
// own limit, which leases can be cut from, and no longer shares its count
// with overrides.
func TestLeaseModeRuleCountsApart(t *testing.T) {
	c, err := rules.LoadOptions{Mode: bouncer.Lease}.Load("testdata/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newEngine(t, "testdata/envoy.yaml")
	e.Swap(c)
	decide(t, e, "edge", hits(desc("user_id=l"), 2))
	over := desc("user_id=l")
	over.Limit = &rules.Override{RequestsPerUnit: 5, Unit: rules.UnitMinute}
	if got := codes(decide(t, e, "edge", over)); got != "OK: OK/4" {
		t.Errorf("an override after 2 hits of a lease-mode rule: got %q, want OK/4 (a count of its own)", got)
	}
}
