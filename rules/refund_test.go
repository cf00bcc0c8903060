package rules_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

const refundConfig = `domain: d
rules:
  - name: shaped
    match: [{key: shaped}]
    algorithm: leaky_bucket
    limits: [{name: steady, rate: 10, period: 1s, burst: 4, shape: true}]
  - name: shaped_shadow
    shadow: true
    match: [{key: shaped_shadow}]
    algorithm: leaky_bucket
    limits: [{name: steady, rate: 1, period: 1s, burst: 4, shape: true}]
  - name: user
    match: [{key: user}]
    algorithm: fixed_window
    limits:
      - {name: per_minute, rate: 2, period: 1m}
      - {name: per_hour, rate: 3, period: 1h}
  - name: shadow
    shadow: true
    match: [{key: shadow}]
    limits: [{name: per_hour, rate: 1, period: 1h, algorithm: fixed_window}]
  - name: tight
    match: [{key: tight}]
    limits: [{name: per_hour, rate: 1, period: 1h, algorithm: fixed_window}]
  - name: free
    match: [{key: free}]
    unlimited: true
`

const refundEnvoyConfig = `domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// recorder is a limiter that counts its Refund calls.
type recorder struct {
	bouncer.Limiter
	refunds int
}

func (r *recorder) Refund(ctx context.Context, req bouncer.Request) error {
	r.refunds++
	return r.Limiter.Refund(ctx, req)
}

// engineFor parses config and serves it from a memory store on a fake
// clock, through a recorder.
func engineFor(t *testing.T, config string) (*rules.Engine, *recorder, *storetest.Clock) {
	t.Helper()
	c, err := rules.Parse("c.yaml", []byte(config))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	clock := storetest.NewClock(storetest.Start.Add(10 * time.Second))
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	rec := &recorder{Limiter: st}
	e := rules.NewEngine(c, rec)
	e.Now = clock.Now
	return e, rec, clock
}

// remaining writes what each limit of each limited status of resp still
// admits, as "per_minute=1 per_hour=2", peeking at the store.
func remaining(t *testing.T, lim bouncer.Limiter, resp rules.Response) string {
	t.Helper()
	var out []string
	for _, st := range resp.Statuses {
		if st.Rule == nil || st.Unlimited {
			continue
		}
		for _, l := range st.Rule.Limits {
			d, err := lim.Check(context.Background(), bouncer.Request{
				Keys: []bouncer.KeyLimits{{Key: st.Key, Limits: []bouncer.Limit{l}}},
				Peek: true,
			})
			if err != nil {
				t.Fatalf("peek: %v", err)
			}
			out = append(out, fmt.Sprintf("%s=%d", l.Name, d.Remaining))
		}
	}
	return strings.Join(out, " ")
}

func TestDelay(t *testing.T) {
	type step struct {
		advance time.Duration
		ds      []rules.Descriptor
		want    string // each status's Delay, then the response's
	}
	shaped := ds(desc("shaped=a"))
	cases := map[string][]step{
		"requests at one instant leave 1/rate apart": {
			{ds: shaped, want: "0s: 0s"},
			{ds: shaped, want: "100ms: 100ms"},
			{ds: shaped, want: "200ms: 200ms"},
			{ds: shaped, want: "300ms: 300ms"},
			{ds: shaped, want: "0s: 0s"}, // the queue is full: denied
			{advance: 150 * time.Millisecond, ds: shaped, want: "250ms: 250ms"},
		},
		"the longest delay of a request's descriptors": {
			{ds: ds(desc("shaped=b"), desc("user=b")), want: "0s 0s: 0s"},
			{ds: ds(desc("user=b"), desc("shaped=b")), want: "100ms 100ms: 100ms"},
			{ds: ds(desc("shaped=b"), desc("free=b")), want: "200ms 0s: 200ms"},
		},
		"a shadow rule's delay is reported, not waited": {
			{ds: ds(desc("shaped_shadow=c"), desc("shaped=c")), want: "0s 0s: 0s"},
			{ds: ds(desc("shaped_shadow=c"), desc("shaped=c")), want: "1s 100ms: 100ms"},
			{ds: ds(desc("shaped_shadow=c")), want: "2s: 0s"},
		},
		"a denied request is not held": {
			{ds: ds(desc("shaped=d"), desc("user=d")), want: "0s 0s: 0s"},
			{ds: ds(desc("shaped=d"), desc("user=d")), want: "100ms 100ms: 100ms"},
			{ds: ds(desc("shaped=d"), desc("user=d")), want: "0s 0s: 0s"},
		},
		"a peek has none": {
			{ds: shaped, want: "0s: 0s"},
			{ds: ds(hits(desc("shaped=a"), 0)), want: "0s: 0s"},
			{ds: shaped, want: "100ms: 100ms"},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			e, _, clock := engineFor(t, refundConfig)
			for i, s := range steps {
				clock.Advance(s.advance)
				resp := decide(t, e, "d", s.ds...)
				var ds []string
				for _, st := range resp.Statuses {
					ds = append(ds, st.Delay.String())
				}
				if got := strings.Join(ds, " ") + ": " + resp.Delay().String(); got != s.want {
					t.Fatalf("step %d: got %q, want %q (%s)", i, got, s.want, codes(resp))
				}
			}
		})
	}
}

// end ends resp's request as how says: "unserved" if empty, "served",
// "failed" or "release".
func end(ctx context.Context, resp *rules.Response, how string) error {
	switch how {
	case "served":
		return resp.Ledger().End(ctx, bouncer.Served)
	case "failed":
		return resp.Ledger().End(ctx, bouncer.Failed)
	case "release":
		return resp.Ledger().Release(ctx)
	}
	return resp.Ledger().End(ctx, bouncer.Unserved)
}

func TestRefund(t *testing.T) {
	cases := map[string]struct {
		config  string             // refundConfig if empty
		ds      []rules.Descriptor // decided n times; the last response is ended
		n       int                // 1 if 0
		how     string             // how the request ends (end)
		twice   bool               // end it twice
		want    string             // remaining after the end
		refunds int                // Limiter.Refund calls
		then    string             // a decide after the end, if set
	}{
		"a fixed window at its limit allows again": {
			ds: ds(desc("user=a")), n: 2,
			want: "per_minute=1 per_hour=2", refunds: 1, then: "OK: OK/0",
		},
		"served gives back no units": {
			ds: ds(desc("user=a")), n: 2, how: "served",
			want: "per_minute=0 per_hour=1", refunds: 0,
		},
		"failed gives back only the units of rules that refund on 5xx": {
			ds: ds(desc("user=a")), n: 2, how: "failed",
			want: "per_minute=0 per_hour=1", refunds: 0,
		},
		"the cost of the descriptor": {
			ds:   ds(hits(desc("user=a"), 2)),
			want: "per_minute=2 per_hour=3", refunds: 1,
		},
		"a denied response refunds nothing": {
			ds: ds(desc("user=a")), n: 3,
			want: "per_minute=0 per_hour=1", refunds: 0, then: "OVER_LIMIT: OVER_LIMIT/0",
		},
		"denied by another descriptor, so not charged": {
			ds: ds(desc("user=a"), desc("tight=a")), n: 2,
			want: "per_minute=1 per_hour=2 per_hour=0", refunds: 0,
		},
		"a descriptor of another cost is another check": {
			ds:   ds(desc("user=a"), hits(desc("user=b"), 3)),
			want: "per_minute=2 per_hour=3 per_minute=2 per_hour=3", refunds: 1,
		},
		"shadow rules' units stay counted": {
			ds:   ds(desc("user=a"), desc("shadow=a")),
			want: "per_minute=2 per_hour=3 per_hour=0", refunds: 1,
		},
		"a shadowed denial was not charged": {
			ds: ds(desc("user=a"), desc("shadow=a")), n: 2,
			want: "per_minute=1 per_hour=2 per_hour=0", refunds: 1,
		},
		"unlimited and unmatched descriptors refund nothing": {
			ds: ds(desc("free=a"), desc("nobody=a")), refunds: 0,
		},
		"nothing is refunded twice": {
			ds: ds(desc("user=a")), n: 2, twice: true,
			want: "per_minute=1 per_hour=2", refunds: 1,
		},
		"envoy semantics: the allowed descriptors of a denied response": {
			config: refundEnvoyConfig,
			ds:     ds(desc("user=a"), desc("ip=a")), n: 2,
			refunds: 1, then: "OVER_LIMIT: OK/0 OVER_LIMIT/0",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			config := c.config
			if config == "" {
				config = refundConfig
			}
			e, rec, _ := engineFor(t, config)
			var resp rules.Response
			for range max(c.n, 1) {
				resp = decide(t, e, "d", c.ds...)
			}
			if err := end(context.Background(), &resp, c.how); err != nil {
				t.Fatalf("end: %v", err)
			}
			if c.twice {
				if err := end(context.Background(), &resp, ""); err != nil {
					t.Fatalf("second end: %v", err)
				}
			}
			if rec.refunds != c.refunds {
				t.Errorf("Limiter.Refund calls: got %d, want %d", rec.refunds, c.refunds)
			}
			if c.config == "" {
				if got := remaining(t, rec.Limiter, resp); got != c.want {
					t.Errorf("remaining: got %q, want %q", got, c.want)
				}
			}
			if c.then != "" {
				if got := codes(decide(t, e, "d", c.ds...)); got != c.then {
					t.Errorf("then: got %q, want %q", got, c.then)
				}
			}
		})
	}
}

func TestRefundOn5xx(t *testing.T) {
	const native = "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s}]\n"
	cases := map[string]struct {
		yaml string
		want bool   // the rule's RefundOn5xx, when it parses
		err  string // "line: reason fragment"
	}{
		"native, set":        {yaml: native + "    refund_on_5xx: true\n", want: true},
		"native, off":        {yaml: native + "    refund_on_5xx: false\n"},
		"native, left out":   {yaml: native},
		"native, not a bool": {yaml: native + "    refund_on_5xx: sometimes\n", err: `6: rules[0].refund_on_5xx: want a boolean, got "sometimes"`},
		"native, on a limit": {yaml: "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s, refund_on_5xx: true}]\n", err: `5: rules[0].limits[0]: unknown field "refund_on_5xx"`},
		"envoy, descriptor":  {yaml: "domain: d\ndescriptors:\n  - key: a\n    refund_on_5xx: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n", err: `4: descriptors[0]: unknown field "refund_on_5xx"`},
		"envoy, rate_limit":  {yaml: "domain: d\nsemantics: bouncer\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, refund_on_5xx: true}\n", err: `5: descriptors[0].rate_limit: unknown field "refund_on_5xx"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := rules.Parse("c.yaml", []byte(c.yaml))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), "c.yaml:"+c.err) {
					t.Fatalf("got %v, want an error with %q", err, "c.yaml:"+c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Domain("d").Rules[0].RefundOn5xx; got != c.want {
				t.Errorf("RefundOn5xx: got %v, want %v", got, c.want)
			}
		})
	}
}

// A refund gives back the limits that were charged, whatever config the
// engine serves by then.
func TestRefundAfterSwap(t *testing.T) {
	e, rec, _ := engineFor(t, refundConfig)
	var resp rules.Response
	for range 2 {
		resp = decide(t, e, "d", desc("user=a"))
	}
	next, err := rules.Parse("c.yaml", []byte(strings.ReplaceAll(refundConfig, "rate: 2, period: 1m", "rate: 5, period: 1m")))
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(next)
	if err := end(context.Background(), &resp, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := remaining(t, rec.Limiter, resp), "per_minute=1 per_hour=2"; got != want {
		t.Errorf("the old config's limits: got %q, want %q", got, want)
	}
}

// A response's Ledger tells whether it holds leases, so that a caller
// holding nothing need not track the request's end.
func TestLedgerHolds(t *testing.T) {
	cfg, err := rules.LoadOptions{AllowConcurrency: true}.Parse("r.yaml", []byte(`domain: d
rules:
  - name: conc
    match: [{key: c}]
    algorithm: concurrency
    limits: [{name: n, rate: 2, period: 1m}]
  - name: plain
    match: [{key: p}]
    limits: [{name: m, rate: 5, period: 1m}]
`))
	if err != nil {
		t.Fatal(err)
	}
	e := rules.NewEngine(cfg, memstore.New(memstore.Options{}))
	for _, tc := range []struct {
		key  string
		want bool
	}{{"c", true}, {"p", false}} {
		resp, err := e.Decide(context.Background(), rules.Request{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: tc.key, Value: "v"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := resp.Ledger().Holds(); got != tc.want {
			t.Errorf("%s: holds leases = %v, want %v", tc.key, got, tc.want)
		}
		if err := resp.Ledger().Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := resp.Ledger().Holds(); got {
			t.Errorf("%s: leases held after the release, want none", tc.key)
		}
	}
}
