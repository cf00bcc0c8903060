package rules_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

const boundedConfig = `
domain: api
rules:
  - name: per_user
    match: [{key: user}]
    limits:
      - {name: s, algorithm: token_bucket, rate: 10, period: 1s, burst: 20}
  - name: daily
    match: [{key: team}]
    limits:
      - {name: d, algorithm: gcra, rate: 1000, period: 24h}
  - name: tight
    match: [{key: bot}]
    max_report: 5
    limits:
      - {name: s, algorithm: token_bucket, rate: 10, period: 1s}
`

// boundedEngine serves cfg from a memory store on a fake clock.
func boundedEngine(t *testing.T, file, cfg string) (*rules.Engine, *storetest.Clock) {
	t.Helper()
	c, err := rules.Parse(file, []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Start.Add(10 * time.Second))
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	e.Now = clock.Now
	return e, clock
}

// TestReportBound asserts that one report may charge a descriptor at most
// its rule's bound: max_report, or by default a minute of its limits'
// rate or twice its largest capacity, whichever is more. Above it the whole
// report is refused, naming the bound, and nothing is charged: a single
// call can no longer put a key into weeks of debt.
func TestReportBound(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name          string
		d             rules.Descriptor
		bound, capaci int64
	}{
		{"a minute of 10/s", desc("user=u1"), 600, 20},
		{"twice the capacity of 1000/day", desc("team=t1"), 2000, 1000},
		{"max_report", desc("bot=b1"), 5, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, _ := boundedEngine(t, "bounded.yaml", boundedConfig)
			report := func(ds ...rules.Descriptor) (rules.Response, error) {
				return e.Report(ctx, rules.Request{Domain: "api", Descriptors: ds})
			}
			// Above the bound, after another descriptor in the same report:
			// refused whole, and nothing charged to either.
			_, err := report(hits(desc("user=other"), 1), hits(c.d, uint64(c.bound)+1))
			var tooLarge *rules.ReportTooLargeError
			if !errors.As(err, &tooLarge) || !errors.Is(err, bouncer.ErrInvalidRequest) {
				t.Fatalf("a report of %d: err = %v, want a ReportTooLargeError wrapping ErrInvalidRequest", c.bound+1, err)
			}
			if tooLarge.Max != c.bound || tooLarge.Descriptor != 1 || !strings.Contains(err.Error(), "max_report") {
				t.Errorf("error %q (max %d, descriptor %d), want max %d, descriptor 1, naming max_report", err, tooLarge.Max, tooLarge.Descriptor, c.bound)
			}
			for _, d := range []rules.Descriptor{desc("user=other"), c.d} {
				if r := decide(t, e, "api", d); r.Code != rules.OK {
					t.Errorf("after a refused report, %v: %v, want OK (nothing charged)", d.Entries, codes(r))
				}
			}
			// At the bound: charged (the check above took one unit).
			r, err := report(hits(c.d, uint64(c.bound)))
			if err != nil {
				t.Fatalf("a report of %d: %v", c.bound, err)
			}
			if want := max(c.capaci-1-c.bound, 0); int64(r.Statuses[0].Remaining) != want {
				t.Errorf("after a report of %d: %v, want %d left", c.bound, codes(r), want)
			}
		})
	}
	t.Run("2^40 hits, the JSON API's old lock-out", func(t *testing.T) {
		e, _ := boundedEngine(t, "bounded.yaml", boundedConfig)
		_, err := e.Report(ctx, rules.Request{Domain: "api", Descriptors: []rules.Descriptor{desc("user=u2")}, HitsAddend: rules.MaxHits})
		if !errors.Is(err, bouncer.ErrInvalidRequest) {
			t.Fatalf("err = %v, want ErrInvalidRequest", err)
		}
		if r := decide(t, e, "api", desc("user=u2")); r.Code != rules.OK {
			t.Errorf("after it: %v, want OK", codes(r))
		}
	})
}

// TestChargeBucketBound asserts that an RLQS report of more usage than a
// bucket's rule may be charged in one report is cut to the bound: a
// report of 2^63-1 allowed puts the key a minute into debt, not 52 days.
func TestChargeBucketBound(t *testing.T) {
	ctx := context.Background()
	e, _ := boundedEngine(t, "bounded.yaml", boundedConfig)
	for _, c := range []struct {
		id    map[string]string
		bound int64
		retry time.Duration // after the charge, of one more unit
	}{
		// 10/s with a burst of 20: 600 taken from 20, 580 owed, and one
		// more unit needs 58.1s of refill.
		{map[string]string{"user": "u1"}, 600, 58100 * time.Millisecond},
		{map[string]string{"bot": "b1"}, 5, 0},
	} {
		b, found, err := e.Bucket("api", c.id)
		if err != nil || !found {
			t.Fatalf("Bucket(%v): %v, %v", c.id, found, err)
		}
		if b.MaxReport != c.bound {
			t.Errorf("%v: MaxReport %d, want %d", c.id, b.MaxReport, c.bound)
		}
		if err := e.ChargeBucket(ctx, b, 1<<63-1); err != nil {
			t.Fatal(err)
		}
		got := decide(t, e, "api", rules.Descriptor{Entries: b.Entries})
		if c.retry == 0 {
			if got.Code != rules.OK {
				t.Errorf("%v: after a cut report of 5 of 10: %v, want OK", c.id, codes(got))
			}
			continue
		}
		if got.Code != rules.OverLimit || got.Statuses[0].RetryAfter != c.retry {
			t.Errorf("%v: after the report: %v, retry after %v, want OVER_LIMIT, retry after %v", c.id, codes(got), got.Statuses[0].RetryAfter, c.retry)
		}
	}
}

// TestMaxReportConfig asserts that max_report is validated with its file
// and line.
func TestMaxReportConfig(t *testing.T) {
	for _, v := range []string{"0", "-1", "1099511627777"} {
		cfg := "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    max_report: " + v + "\n    limits: [{rate: 1, period: 1s}]\n"
		_, err := rules.Parse("m.yaml", []byte(cfg))
		want := "m.yaml:3: rules[0].max_report: want 1 to 1099511627776, got " + v
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("max_report %s: err = %v, want %q", v, err, want)
		}
	}
}
