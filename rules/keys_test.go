package rules_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

// observer records what an engine tells its KeyObserver.
type observer struct {
	mu      sync.Mutex
	decided []rules.KeyInfo
	denied  []string
}

func (o *observer) Decided(k rules.KeyInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if k.Judge != nil {
		judge := *k.Judge // the engine's own, to read during the call
		k.Judge = &judge
	}
	o.decided = append(o.decided, k)
}

func (o *observer) Denied(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.denied = append(o.denied, key)
}

// The engine tells its KeyObserver of each counted key of a decision, with
// the decision's instant, and of each key it denied; not of unlimited or
// unmatched descriptors.
func TestKeyObserver(t *testing.T) {
	e, clock := newEngine(t, "testdata/envoy.yaml")
	o := &observer{}
	e.Keys = o
	var resp rules.Response
	for range 4 {
		resp = decide(t, e, "edge", desc("user_id=u"), desc("internal=1"), desc("nope=1"))
	}
	if len(o.decided) != 4 {
		t.Fatalf("Decided: told of %d keys, want 4 (one counted descriptor, four times)", len(o.decided))
	}
	k := o.decided[3]
	if k.Key != resp.Statuses[0].Key || k.Domain != "edge" || k.Rule == nil || k.Rule.Path != "user_id" ||
		len(k.Entries) != 1 || k.Entries[0].Value != "u" || len(k.Limits) != 1 || !k.LastSeen.Equal(clock.Now()) || k.Judge == nil {
		t.Errorf("Decided: got %+v, want user_id=u's key %q in edge, its limit and judge, seen now", k, resp.Statuses[0].Key)
	}
	if want := []string{resp.Statuses[0].Key}; !slices.Equal(o.denied, want) {
		t.Errorf("Denied: got %q, want the fourth request's key only %q (3 per minute)", o.denied, want)
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

// A key counted under a request's override shows its count against the
// override's rate, not against the per-unit limit the count is kept under.
func TestStateOfAnOverride(t *testing.T) {
	e, clock := newEngine(t, "testdata/envoy.yaml")
	o := &observer{}
	e.Keys = o
	send := func(rate uint32, n uint64) {
		d := hits(desc("user_id=o"), n)
		d.Limit = &rules.Override{RequestsPerUnit: rate, Unit: rules.UnitMinute}
		decide(t, e, "edge", d)
	}
	state := func() rules.LimitState {
		t.Helper()
		k := o.decided[len(o.decided)-1]
		if k.Judge == nil || k.Rule != nil {
			t.Fatalf("observed: got %+v, want a key with its override", k)
		}
		states, err := e.State(t.Context(), k)
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
