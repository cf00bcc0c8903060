package rules_test

import (
	"context"
	"testing"

	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

const customBenchRules = `domain: d
rules:
  - name: plain
    match: [{key: user}, {key: kind, value: plain}]
    limits: [{name: day, rate: 1000000000, period: 1d, algorithm: fixed_window}]
  - name: overridable
    match: [{key: user}, {key: kind, value: custom}]
    limits: [{name: day, rate: 1000000000, period: 1d, algorithm: fixed_window}]
    overrides:
      day: {max: 2000000000}
`

// BenchmarkRuntimeLimits decides one descriptor on the memory store under
// a rule without overrides, under one with overrides whose key has none,
// and under one whose key has its own rate: what reading a key's runtime
// limits at each check costs.
func BenchmarkRuntimeLimits(b *testing.B) {
	c, err := rules.Parse("rules.yaml", []byte(customBenchRules))
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	defer st.Close()
	e := rules.NewEngine(c, st)
	ctx := context.Background()
	k, err := e.Resolve("d", []rules.Entry{{Key: "user", Value: "set"}, {Key: "kind", Value: "custom"}})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := e.SetLimits(ctx, k, map[string]int64{"day": 1500000000}, "bench"); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, user, kind string }{
		{"rule=plain", "u", "plain"},
		{"rule=overrides/key=none", "u", "custom"},
		{"rule=overrides/key=own", "set", "custom"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := rules.Request{Domain: "d", Descriptors: []rules.Descriptor{desc("user="+c.user, "kind="+c.kind)}}
			b.ReportAllocs()
			for b.Loop() {
				if resp, err := e.Decide(ctx, req); err != nil || resp.Code != rules.OK {
					b.Fatalf("Decide: %v %v", resp.Code, err)
				}
			}
		})
	}
}
