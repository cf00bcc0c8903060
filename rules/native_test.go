package rules_test

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

func TestNativeSemantics(t *testing.T) {
	type step struct {
		advance time.Duration
		ds      []rules.Descriptor
		want    string
	}
	cases := map[string][]step{
		"several limits at once, the least remaining reported": {
			{ds: ds(desc("user_id=a")), want: "OK: OK/1"},
			{ds: ds(desc("user_id=a")), want: "OK: OK/0"},
			{ds: ds(desc("user_id=a")), want: "OVER_LIMIT: OVER_LIMIT/0"},
			{advance: time.Second, ds: ds(desc("user_id=a")), want: "OK: OK/1"},
			{ds: ds(desc("user_id=a")), want: "OK: OK/0"},
			{advance: time.Second, ds: ds(desc("user_id=a")), want: "OK: OK/0"},
			{ds: ds(desc("user_id=a")), want: "OVER_LIMIT: OVER_LIMIT/0"}, // 5 per day spent
		},
		"plans": {
			{ds: ds(desc("user_id=p", "plan=pro"), desc("user_id=q", "plan=enterprise")), want: "OK: OK/19 OK/unlimited"},
			{ds: ds(desc("user_id=r", "plan=unknown")), want: "OK: OK/1"},
		},
		"all or nothing across descriptors": {
			{ds: ds(desc("remote_address=10.0.0.1")), want: "OK: OK/2"},
			{ds: ds(desc("remote_address=10.0.0.1")), want: "OK: OK/1"},
			{ds: ds(desc("remote_address=10.0.0.1")), want: "OK: OK/0"},
			// The IP denies, so the user is not charged either.
			{ds: ds(desc("user_id=b"), desc("remote_address=10.0.0.1")), want: "OVER_LIMIT: OK/2 OVER_LIMIT/0"},
			{ds: ds(desc("user_id=b")), want: "OK: OK/1"},
		},
		"all or nothing across descriptors of different hits": {
			{ds: ds(desc("remote_address=10.0.0.2")), want: "OK: OK/2"},
			{ds: ds(desc("remote_address=10.0.0.2")), want: "OK: OK/1"},
			// The IP's 2 hits are denied, so the user's 1 (checked first,
			// as a check of its own cost) is given back.
			{ds: ds(hits(desc("user_id=c"), 1), hits(desc("remote_address=10.0.0.2"), 2)), want: "OVER_LIMIT: OK/2 OVER_LIMIT/1"},
			{ds: ds(desc("user_id=c")), want: "OK: OK/1"},
		},
		"IPv6 addresses of one /64 share a limit": {
			{ds: ds(desc("remote_address=2001:db8::1")), want: "OK: OK/2"},
			{ds: ds(desc("remote_address=2001:db8::2:3")), want: "OK: OK/1"},
			{ds: ds(desc("remote_address=2001:db8:0:1::1")), want: "OK: OK/2"},
		},
		"shadow rules never deny nor block the others": {
			{ds: ds(desc("experiment=x"), desc("user_id=s")), want: "OK: OK/0 OK/1"},
			{ds: ds(desc("experiment=x"), desc("user_id=s")), want: "OK: OK/0 OK/0"},
		},
		"nested match with a value": {
			{ds: ds(desc("method=POST", "route=/a")), want: "OK: OK/0"},
			{ds: ds(desc("method=POST", "route=/a")), want: "OVER_LIMIT: OVER_LIMIT/0"},
			{ds: ds(desc("method=GET", "route=/a")), want: "OK: OK"},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			e, clock := newEngine(t, "testdata/native.yaml")
			for i, s := range steps {
				clock.Advance(s.advance)
				if got := codes(decide(t, e, "api", s.ds...)); got != s.want {
					t.Fatalf("step %d: got %q, want %q", i, got, s.want)
				}
			}
		})
	}
}

func TestNativeRetryAfter(t *testing.T) {
	e, _ := newEngine(t, "testdata/native.yaml")
	decide(t, e, "api", desc("method=POST", "route=/b"))
	resp := decide(t, e, "api", desc("method=POST", "route=/b"))
	st := resp.Statuses[0]
	if st.Code != rules.OverLimit || st.RetryAfter != 10*time.Second {
		t.Errorf("got code %v retry-after %v, want OVER_LIMIT and 10s (one GCRA interval)", st.Code, st.RetryAfter)
	}
	if st.Limit == nil || st.Limit.Name != "writes" || st.Limit.Window != 10*time.Second || st.Limit.Unit != rules.UnitUnknown {
		t.Errorf("current limit: got %+v, want writes per 10s", st.Limit)
	}
}
