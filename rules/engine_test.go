package rules_test

import (
	"errors"
	"testing"

	"github.com/bouncerhq/bouncer/rules"
)

// An Engine is ready however it was made: the zero Engine serves the
// empty config, and one without a Limiter fails the requests a rule
// limits with ErrNoLimiter, never with a panic.
func TestZeroEngine(t *testing.T) {
	var e rules.Engine
	if c := e.Config(); c == nil || len(c.Domains()) != 0 {
		t.Fatalf("the zero Engine's config: got %v, want an empty one", c)
	}
	resp, err := e.Decide(t.Context(), rules.Request{Domain: "d", Descriptors: ds(desc("k=v"))})
	if err != nil || resp.Code != rules.OK || resp.Statuses[0].Limit != nil {
		t.Fatalf("the zero Engine: got %v %+v, want OK with no limit (an unknown domain)", err, resp)
	}
	e.RejectUnknownDomains = true
	if _, err := e.Decide(t.Context(), rules.Request{Domain: "d", Descriptors: ds(desc("k=v"))}); !errors.Is(err, rules.ErrUnknownDomain) {
		t.Fatalf("the zero Engine rejecting unknown domains: got %v, want ErrUnknownDomain", err)
	}

	c, err := rules.Parse("d.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if old := e.Swap(c); old == nil || len(old.Domains()) != 0 {
		t.Fatalf("Swap on the zero Engine returned %v, want the empty config", old)
	}
	if resp := decide(t, &e, "d", desc("other=v")); codes(resp) != "OK: OK" {
		t.Errorf("a descriptor no rule limits: got %q, want OK with no limit", codes(resp))
	}
	if _, err := e.Decide(t.Context(), rules.Request{Domain: "d", Descriptors: ds(desc("k=v"))}); !errors.Is(err, rules.ErrNoLimiter) {
		t.Errorf("a limited descriptor with no Limiter: got %v, want ErrNoLimiter", err)
	}
	k, err := e.Resolve("d", []rules.Entry{{Key: "k", Value: "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.State(t.Context(), k); !errors.Is(err, rules.ErrNoLimiter) {
		t.Errorf("State with no Limiter: got %v, want ErrNoLimiter", err)
	}
	if err := e.Reset(t.Context(), k); !errors.Is(err, rules.ErrNoLimiter) {
		t.Errorf("Reset with no Limiter: got %v, want ErrNoLimiter", err)
	}
	if e.Swap(nil); len(e.Config().Domains()) != 0 {
		t.Errorf("after Swap(nil): got %d domains, want the empty config", len(e.Config().Domains()))
	}
}
