package rules_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

const (
	concurrencyNative = `domain: d
rules:
  - name: slots
    match: [{key: user}]
    limits:
      - {name: in_flight, rate: 1, period: 1m, algorithm: concurrency}
      - {name: per_hour, rate: 10, period: 1h, algorithm: fixed_window}
  - name: other
    match: [{key: other}]
    limits: [{rate: 10, period: 1h, algorithm: fixed_window}]
`
	concurrencyRuleAlgorithm = `domain: d
rules:
  - name: slots
    match: [{key: user}]
    algorithm: concurrency
    limits: [{rate: 1, period: 1m}]
`
	concurrencyEnvoy = `domain: d
semantics: bouncer
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: concurrency}
`
)

func TestConcurrencyOptIn(t *testing.T) {
	cases := map[string]struct {
		yaml string
		line string // of the problem without the opt-in
	}{
		"native, on the limit": {concurrencyNative, "6: rules[0].limits[0].algorithm: "},
		"native, on the rule":  {concurrencyRuleAlgorithm, "6: rules[0].limits[0].algorithm: "},
		"envoy format":         {concurrencyEnvoy, "5: algorithm: "},
	}
	const reason = "concurrency limits need a release when each request ends, which the service cannot be told"
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := rules.Parse("c.yaml", []byte(c.yaml))
			var ce *rules.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "c.yaml:"+c.line+reason) {
				t.Errorf("Parse: got %v, want a *ConfigError with %q", err, "c.yaml:"+c.line+reason)
			}
			cfg, err := rules.LoadOptions{AllowConcurrency: true}.Parse("c.yaml", []byte(c.yaml))
			if err != nil {
				t.Fatalf("LoadOptions{AllowConcurrency: true}.Parse: %v", err)
			}
			if got := cfg.Domain("d").Rules[0].Limits[0].Algorithm; got != bouncer.Concurrency {
				t.Errorf("algorithm: got %v, want concurrency", got)
			}
		})
	}
}

func TestConcurrencyLoadAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, concurrencyNative)
	if _, err := rules.Load(path); err == nil || !strings.Contains(err.Error(), "c.yaml:6: ") {
		t.Errorf("Load: got %v, want the concurrency limit rejected at line 6", err)
	}
	allow := rules.LoadOptions{AllowConcurrency: true}
	c, err := allow.Load(path)
	if err != nil {
		t.Fatalf("LoadOptions.Load: %v", err)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	write(t, path, concurrencyRuleAlgorithm)
	if err := (&rules.Reloader{Path: path, Engine: e}).Reload(); err == nil {
		t.Error("Reloader without Options: got no error, want the concurrency limit rejected")
	}
	if err := (&rules.Reloader{Path: path, Engine: e, Options: allow}).Reload(); err != nil {
		t.Errorf("Reloader with AllowConcurrency: %v", err)
	}
	if got := len(e.Config().Domain("d").Rules[0].Limits); got != 1 {
		t.Errorf("after the reload: got %d limits, want the new config's 1", got)
	}
}

// concurrencyEngine serves concurrencyNative, loaded with the opt-in, on
// a fake clock, through wrap(store) if wrap is not nil.
func concurrencyEngine(t *testing.T, wrap func(bouncer.Limiter) bouncer.Limiter) (*rules.Engine, *memstore.Store) {
	t.Helper()
	c, err := rules.LoadOptions{AllowConcurrency: true}.Parse("c.yaml", []byte(concurrencyNative))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Start)
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	var lim bouncer.Limiter = st
	if wrap != nil {
		lim = wrap(st)
	}
	return rules.NewEngine(c, lim), st
}

func TestConcurrencyLeases(t *testing.T) {
	cases := map[string]struct {
		how  string // how the request ends (end)
		want string // remaining after the release
	}{
		"unserved: everything":  {"", "in_flight=1 per_hour=10"},
		"released: leases only": {"release", "in_flight=1 per_hour=9"},
		"served: leases only":   {"served", "in_flight=1 per_hour=9"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e, st := concurrencyEngine(t, nil)
			first := decide(t, e, "d", desc("user=a"))
			if got := codes(decide(t, e, "d", desc("user=a"))); got != "OVER_LIMIT: OVER_LIMIT/0" {
				t.Fatalf("a second request in flight: got %q, want OVER_LIMIT", got)
			}
			if err := end(context.Background(), &first, c.how); err != nil {
				t.Fatal(err)
			}
			if got := remaining(t, st, first); got != c.want {
				t.Errorf("after the release: got %q, want %q", got, c.want)
			}
			if got := codes(decide(t, e, "d", desc("user=a"))); got != "OK: OK/0" {
				t.Errorf("after the release: got %q, want OK", got)
			}
		})
	}
}

// failing is a limiter whose Checks fail once fail is set.
type failing struct {
	bouncer.Limiter
	checks, failAt int
}

func (f *failing) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	f.checks++
	if f.checks == f.failAt {
		return bouncer.Decision{}, errors.New("store down")
	}
	return f.Limiter.Check(ctx, r)
}

// A request whose descriptors have different costs is two checks; when
// the second fails, the first one's lease is released.
func TestConcurrencyReleasedOnFailure(t *testing.T) {
	f := &failing{failAt: 2}
	e, st := concurrencyEngine(t, func(l bouncer.Limiter) bouncer.Limiter { f.Limiter = l; return f })
	_, err := e.Decide(context.Background(), rules.Request{Domain: "d", Descriptors: ds(desc("user=a"), hits(desc("other=a"), 2))})
	if err == nil || !strings.Contains(err.Error(), "store down") {
		t.Fatalf("Decide: got %v, want the store's failure", err)
	}
	resp := decide(t, e, "d", desc("user=a"))
	if got := codes(resp); got != "OK: OK/0" {
		t.Errorf("after the failed Decide: got %q, want OK: its lease released", got)
	}
	// Only leases are given back: the failed Decide's units stay charged.
	if got, want := remaining(t, st, resp), "in_flight=0 per_hour=8"; got != want {
		t.Errorf("remaining: got %q, want %q", got, want)
	}
}
