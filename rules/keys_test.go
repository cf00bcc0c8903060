package rules_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

func TestKeyIndex(t *testing.T) {
	e, clock := newEngine(t, "testdata/envoy.yaml")
	e.Keys = rules.NewKeyIndex(3)
	for i := range 4 {
		decide(t, e, "edge", desc(fmt.Sprintf("user_id=u%d", i)), desc("internal=1"), desc("nope=1"))
		clock.Advance(time.Second)
	}
	if got := e.Keys.Len(); got != 3 {
		t.Fatalf("index holds %d keys, want its bound 3 (unlimited and unmatched descriptors are not counted keys)", got)
	}
	page, more := e.Keys.List("", 2)
	if len(page) != 2 || !more {
		t.Fatalf("first page: got %d keys, more %v; want 2 and more", len(page), more)
	}
	rest, more := e.Keys.List(page[1].Key, 2)
	if len(rest) != 1 || more {
		t.Fatalf("second page: got %d keys, more %v; want 1 and no more", len(rest), more)
	}
	seen := map[string]bool{}
	for _, k := range append(page, rest...) {
		seen[k.Entries[0].Value] = true
		if k.Rule == nil || k.Rule.Path != "user_id" || k.Domain != "edge" {
			t.Errorf("key %q: got rule %v domain %q, want user_id in edge", k.Key, k.Rule, k.Domain)
		}
	}
	if seen["u0"] || !seen["u1"] || !seen["u2"] || !seen["u3"] {
		t.Errorf("keys held: got %v, want u1..u3 (u0, first seen longest ago, forgotten)", seen)
	}
}

func TestStateAndReset(t *testing.T) {
	e, _ := newEngine(t, "testdata/native.yaml")
	for range 2 {
		decide(t, e, "api", desc("user_id=s"))
	}
	k, err := e.Resolve("api", desc("user_id=s").Entries)
	if err != nil {
		t.Fatal(err)
	}
	states, err := e.State(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, s := range states {
		got[s.Limit.Name] = s.Remaining
	}
	if got["per_second"] != 0 || got["per_day"] != 3 {
		t.Fatalf("state after two checks: got %v, want per_second 0 and per_day 3", got)
	}
	if got := codes(decide(t, e, "api", desc("user_id=s"))); got != "OVER_LIMIT: OVER_LIMIT/0" {
		t.Fatalf("a third check: got %q, want over", got)
	}
	if err := e.Reset(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if got := codes(decide(t, e, "api", desc("user_id=s"))); got != "OK: OK/1" {
		t.Errorf("after a reset: got %q, want a fresh key (OK/1)", got)
	}
	// A key of a rule with plans is counted under the plan of each
	// request: a reset, which names the key without a plan, forgets its
	// state under every plan.
	for range 20 {
		decide(t, e, "api", desc("user_id=p", "plan=pro"))
	}
	if got := codes(decide(t, e, "api", desc("user_id=p", "plan=pro"))); got != "OVER_LIMIT: OVER_LIMIT/0" {
		t.Fatalf("the pro plan's 21st check: got %q, want over", got)
	}
	k, err = e.Resolve("api", desc("user_id=p").Entries)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Reset(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if got := codes(decide(t, e, "api", desc("user_id=p", "plan=pro"))); got != "OK: OK/19" {
		t.Errorf("the pro plan after a reset: got %q, want a fresh key (OK/19)", got)
	}
	if _, err := e.Resolve("api", desc("nothing=1").Entries); err == nil {
		t.Errorf("Resolve of a descriptor no rule matches: got no error")
	}
}

// The index keeps long client values cut short, so that it stays small
// whatever clients send; the key stays exact.
func TestKeyIndexBoundsValues(t *testing.T) {
	e, _ := newEngine(t, "testdata/envoy.yaml")
	e.Keys = rules.NewKeyIndex(10)
	long := strings.Repeat("v", rules.MaxValueLen)
	resp := decide(t, e, "edge", desc("user_id="+long))
	keys, _ := e.Keys.List("", 10)
	if len(keys) != 1 {
		t.Fatalf("got %d keys, want 1", len(keys))
	}
	if v := keys[0].Entries[0].Value; len(v) > 80 || !strings.HasSuffix(v, "…") {
		t.Errorf("kept value: %d bytes %q, want it cut short", len(v), v)
	}
	if keys[0].Key != resp.Statuses[0].Key {
		t.Errorf("key: got %q, want the exact store key %q", keys[0].Key, resp.Statuses[0].Key)
	}
}

// A key counted under a request's override shows its count against the
// override's rate, not against the per-unit limit the count is kept under.
func TestStateOfAnOverride(t *testing.T) {
	e, clock := newEngine(t, "testdata/envoy.yaml")
	e.Keys = rules.NewKeyIndex(8)
	send := func(rate uint32, n uint64) {
		d := hits(desc("user_id=o"), n)
		d.Limit = &rules.Override{RequestsPerUnit: rate, Unit: rules.UnitMinute}
		decide(t, e, "edge", d)
	}
	state := func() rules.LimitState {
		t.Helper()
		keys, _ := e.Keys.List("", 8)
		if len(keys) != 1 || keys[0].Judge == nil || keys[0].Rule != nil {
			t.Fatalf("index: got %+v, want one key with its override", keys)
		}
		states, err := e.State(t.Context(), keys[0])
		if err != nil || len(states) != 1 {
			t.Fatalf("State: %v, %d states", err, len(states))
		}
		return states[0]
	}
	clock.Set(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	send(3, 2)
	if s := state(); s.Limit.Rate != 3 || s.Limit.Period != time.Minute || s.Remaining != 1 || !s.Allowed || s.RetryAfter != 0 {
		t.Errorf("2 of 3: got rate %d per %v, remaining %d, allowed %v, retry %v; want 3 per 1m, 1, true, 0", s.Limit.Rate, s.Limit.Period, s.Remaining, s.Allowed, s.RetryAfter)
	}
	send(5, 3)
	if s := state(); s.Limit.Rate != 5 || s.Remaining != 0 || !s.Allowed || s.RetryAfter != 50*time.Second {
		t.Errorf("5 of 5: got rate %d, remaining %d, allowed %v, retry %v; want 5, 0, true, 50s (the window's end)", s.Limit.Rate, s.Remaining, s.Allowed, s.RetryAfter)
	}
	send(2, 0)
	if s := state(); s.Limit.Rate != 2 || s.Remaining != 0 || s.Allowed || s.RetryAfter != 50*time.Second {
		t.Errorf("5 counted, override now 2: got rate %d, remaining %d, allowed %v, retry %v; want 2, 0, false, 50s", s.Limit.Rate, s.Remaining, s.Allowed, s.RetryAfter)
	}
}
