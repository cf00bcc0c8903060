package rules_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/edgetest"
	"github.com/bouncerhq/bouncer/rules"
)

const meteredConfig = `
domain: llm
rules:
  - name: tokens
    match:
      - key: api_key
    limits:
      - {name: per_minute, algorithm: fixed_window, rate: 100, period: 1m}
  - name: staff
    match:
      - key: staff
    unlimited: true
`

// meteredEngine serves meteredConfig, counting in lim.
func meteredEngine(t *testing.T, lim bouncer.Limiter) *rules.Engine {
	t.Helper()
	c, err := rules.Parse("llm.yaml", []byte(meteredConfig))
	if err != nil {
		t.Fatal(err)
	}
	return rules.NewEngine(c, lim)
}

func TestSettle(t *testing.T) {
	ctx := context.Background()
	key := "llm:tokens:{k1}"
	for _, tc := range []struct {
		name             string
		estimate, actual uint64
		used             int64 // charged after the settle
	}{
		{name: "more than the estimate, past the limit", estimate: 10, actual: 150, used: 150},
		{name: "less than the estimate", estimate: 60, actual: 15, used: 15},
		{name: "nothing used", estimate: 60, actual: 0, used: 0},
		{name: "the estimate", estimate: 60, actual: 60, used: 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &edgetest.Ledger{}
			e := meteredEngine(t, l)
			resp, err := e.Decide(ctx, rules.Request{Domain: "llm", Descriptors: []rules.Descriptor{desc("api_key=k1")}, HitsAddend: tc.estimate})
			if err != nil || resp.Code != rules.OK {
				t.Fatalf("Decide: %v, %v", resp.Code, err)
			}
			key = resp.Statuses[0].Key
			actual := func(int) (int64, bool) { return int64(tc.actual), true }
			if err := resp.Ledger().Settle(ctx, actual); err != nil {
				t.Fatalf("Settle: %v", err)
			}
			if got := l.Used(key, "per_minute"); got != tc.used {
				t.Errorf("%d charged, want %d", got, tc.used)
			}
			// A failure then gives back what the request cost in the end.
			if err := resp.Ledger().End(ctx, bouncer.Unserved); err != nil {
				t.Fatal(err)
			}
			if got := l.Used(key, "per_minute"); got != 0 {
				t.Errorf("after a refund of the settled request: %d charged, want 0", got)
			}
		})
	}
}

func TestReport(t *testing.T) {
	ctx := context.Background()
	l := &edgetest.Ledger{}
	e := meteredEngine(t, l)
	report := func(hits uint64, ds ...rules.Descriptor) rules.Response {
		t.Helper()
		resp, err := e.Report(ctx, rules.Request{Domain: "llm", Descriptors: ds, HitsAddend: hits})
		if err != nil {
			t.Fatalf("Report: %v", err)
		}
		return resp
	}
	// Charged whatever the count, and reported: 40 left, then nothing.
	if r := report(60, desc("api_key=k1")); r.Code != rules.OK || r.Statuses[0].Remaining != 40 {
		t.Errorf("after 60 of 100: %v with %d left, want OK with 40", r.Code, r.Statuses[0].Remaining)
	}
	r := report(90, desc("api_key=k1"), desc("staff=ann"), desc("other=x"))
	if r.Code != rules.OverLimit || r.Binding != 0 || r.Statuses[0].Code != rules.OverLimit || r.Statuses[0].Remaining != 0 {
		t.Errorf("after 150 of 100: %v (binding %d), status %v with %d left, want OVER_LIMIT with 0", r.Code, r.Binding, r.Statuses[0].Code, r.Statuses[0].Remaining)
	}
	if !r.Statuses[1].Unlimited || r.Statuses[2].Limit != nil {
		t.Errorf("an unlimited and an unknown descriptor: %+v, %+v, want unlimited and no limit", r.Statuses[1], r.Statuses[2])
	}
	if got := l.Used(r.Statuses[0].Key, "per_minute"); got != 150 {
		t.Errorf("%d charged, want 150: a report charges past the limit", got)
	}
	// The next check is refused.
	d, err := e.Decide(ctx, rules.Request{Domain: "llm", Descriptors: []rules.Descriptor{desc("api_key=k1")}})
	if err != nil || d.Code != rules.OverLimit {
		t.Errorf("a check after the debt: %v, %v, want OVER_LIMIT", d.Code, err)
	}

	// A limiter that cannot charge says so.
	e.Limiter = noCharge{l}
	if _, err := e.Report(ctx, rules.Request{Domain: "llm", Descriptors: []rules.Descriptor{desc("api_key=k2")}}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Report on a limiter without Charge: err = %v, want ErrUnsupported", err)
	}
	if _, err := e.Report(ctx, rules.Request{Domain: "llm"}); !errors.Is(err, bouncer.ErrInvalidRequest) {
		t.Errorf("Report of no descriptors: err = %v, want ErrInvalidRequest", err)
	}
}

// noCharge hides its limiter's Charge.
type noCharge struct{ bouncer.Limiter }
