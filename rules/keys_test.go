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
	states, err := e.State(t.Context(), k.Key, k.Limits)
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
