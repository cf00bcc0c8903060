package rules_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

// The envoyproxy/ratelimit semantics: each descriptor on its own, every
// hit counted, fixed windows on the epoch.
func TestEnvoySemantics(t *testing.T) {
	type step struct {
		advance time.Duration
		ds      []rules.Descriptor
		want    string
	}
	cases := map[string][]step{
		"a key with any value counts per value": {
			{ds: ds(desc("user_id=a")), want: "OK: OK/2"},
			{ds: ds(desc("user_id=a")), want: "OK: OK/1"},
			{ds: ds(desc("user_id=b")), want: "OK: OK/2"},
			{ds: ds(desc("user_id=a")), want: "OK: OK/0"},
			{ds: ds(desc("user_id=a")), want: "OVER_LIMIT: OVER_LIMIT/0"},
			{advance: time.Minute, ds: ds(desc("user_id=a")), want: "OK: OK/2"},
		},
		"denied hits are charged, so a peek after them is over": {
			{ds: ds(hits(desc("user_id=c"), 2)), want: "OK: OK/1"},
			{ds: ds(hits(desc("user_id=c"), 2)), want: "OVER_LIMIT: OVER_LIMIT/0"},
			{ds: ds(hits(desc("user_id=c"), 0)), want: "OVER_LIMIT: OVER_LIMIT/0"},
			{ds: ds(hits(desc("user_id=c"), 1)), want: "OVER_LIMIT: OVER_LIMIT/0"},
		},
		"a peek at a full window is OK": {
			{ds: ds(hits(desc("user_id=d"), 3)), want: "OK: OK/0"},
			{ds: ds(hits(desc("user_id=d"), 0)), want: "OK: OK/0"},
		},
		"exact value, wildcard, and nothing for other values": {
			{ds: ds(desc("tenant=acme"), desc("tenant=bigco"), desc("tenant=small")), want: "OK: OK/4 OK/1 OK"},
			{ds: ds(desc("tenant=bigco"), desc("tenant=bigger")), want: "OK: OK/0 OK/1"},
			{ds: ds(desc("tenant=bigco")), want: "OVER_LIMIT: OVER_LIMIT/0"},
		},
		"share_threshold makes a wildcard one counter": {
			{ds: ds(desc("path=/files/a")), want: "OK: OK/1"},
			{ds: ds(desc("path=/files/b")), want: "OK: OK/0"},
			{ds: ds(desc("path=/docs/a"), desc("path=/docs/b")), want: "OK: OK/0 OK/0"},
		},
		"nested descriptors and replaces": {
			{ds: ds(desc("source=proxy", "dest=x")), want: "OK: OK/1"},
			{ds: ds(desc("source=proxy")), want: "OK: OK"},
			{ds: ds(desc("source=proxy", "dest=x", "extra=1")), want: "OK: OK"},
			// vip replaces per_dest: the x descriptor is not counted.
			{ds: ds(desc("source=proxy", "dest=vip"), desc("source=proxy", "dest=x")), want: "OK: OK/3 OK"},
			{ds: ds(desc("source=proxy", "dest=x")), want: "OK: OK/0"},
		},
		"unlimited, banned, whitelisted and unknown": {
			{ds: ds(desc("internal=1"), desc("banned=1"), desc("whitelisted=1"), desc("nope=1")), want: "OVER_LIMIT: OK/unlimited OVER_LIMIT/0 OK OK"},
			// A limit of 0 counts its hits: a peek is over once any was
			// counted in the window, and OK before.
			{ds: ds(hits(desc("banned=1"), 0)), want: "OVER_LIMIT: OVER_LIMIT/0"},
			{ds: ds(hits(desc("banned=2"), 0)), want: "OK: OK/0"},
		},
		"shadow mode answers OK": {
			{ds: ds(desc("canary=1")), want: "OK: OK/0"},
			{ds: ds(desc("canary=1")), want: "OK: OK/0"},
		},
	}
	for name, steps := range cases {
		for _, concurrent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/concurrent=%v", name, concurrent), func(t *testing.T) {
				e, clock := newEngine(t, "testdata/envoy.yaml")
				e.Concurrent = concurrent
				for i, s := range steps {
					clock.Advance(s.advance)
					if got := codes(decide(t, e, "edge", s.ds...)); got != s.want {
						t.Fatalf("step %d: got %q, want %q", i, got, s.want)
					}
				}
			})
		}
	}
}

func ds(d ...rules.Descriptor) []rules.Descriptor { return d }

func TestEnvoyStatusDetails(t *testing.T) {
	e, clock := newEngine(t, "testdata/envoy.yaml")
	clock.Advance(7*time.Second + 300*time.Millisecond) // 17.3 s into a minute
	resp := decide(t, e, "edge", desc("user_id=z"), desc("canary=1"), desc("canary=1"), desc("internal=1"))
	st := resp.Statuses[0]
	if st.Limit == nil || st.Limit.RequestsPerUnit != 3 || st.Limit.Unit != rules.UnitMinute {
		t.Fatalf("current limit: got %+v, want 3 per minute", st.Limit)
	}
	if want := 43 * time.Second; st.ResetAfter != want {
		t.Errorf("duration until reset: got %v, want %v (60 − 17)", st.ResetAfter, want)
	}
	if !resp.Statuses[2].Shadowed || resp.Statuses[2].Code != rules.OK {
		t.Errorf("second canary hit: got %+v, want OK and shadowed", resp.Statuses[2])
	}
	if resp.Statuses[1].Shadowed {
		t.Errorf("first canary hit is within the limit, so not shadowed")
	}
	if got := resp.Statuses[3].Remaining; got != 1<<32-1 {
		t.Errorf("unlimited remaining: got %d, want the uint32 maximum", got)
	}
	if resp.Binding != 1 && resp.Binding != 2 {
		t.Errorf("binding: got %d, want a canary status (least remaining)", resp.Binding)
	}
}

func TestEnvoyOverrideAndUnknownDomain(t *testing.T) {
	e, _ := newEngine(t, "testdata/envoy.yaml")
	d := desc("user_id=o")
	d.Limit = &rules.Override{RequestsPerUnit: 1, Unit: rules.UnitHour}
	if got := codes(decide(t, e, "edge", d, d)); got != "OVER_LIMIT: OK/0 OVER_LIMIT/0" {
		t.Errorf("override: got %q", got)
	}
	if got := codes(decide(t, e, "nowhere", desc("user_id=o"))); got != "OK: OK" {
		t.Errorf("unknown domain: got %q, want OK without a limit", got)
	}
	e.RejectUnknownDomains = true
	if _, err := e.Decide(t.Context(), rules.Request{Domain: "nowhere", Descriptors: ds(desc("a=b"))}); err == nil {
		t.Errorf("unknown domain with RejectUnknownDomains: got no error")
	}
}
