package rules_test

import (
	"context"
	"testing"

	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

const settleBenchRules = `domain: llm
prices:
  models:
    currency: USD
    models:
      small: {input: 0.15, output: 0.60, cached: 0.075}
      large: {input: 3, output: 15, cached: 0.30}
rules:
  - name: units
    match: [{key: api_key}, {key: meter, value: units}]
    limits: [{rate: 1000000000000, period: 1h, algorithm: fixed_window}]
  - name: money
    match: [{key: api_key}, {key: meter, value: money}]
    price: models
    limits: [{budget: 1000000, period: 1h, algorithm: fixed_window}]
`

// BenchmarkSettle reserves an estimate of 600 tokens and settles it at
// the usage an LLM reports (300 input, 200 output tokens of the large
// model), on the memory store, for a rule that counts tokens and for one
// that prices them: the same decision and charge, the price table's
// arithmetic the only difference.
func BenchmarkSettle(b *testing.B) {
	c, err := rules.Parse("rules.yaml", []byte(settleBenchRules))
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	defer st.Close()
	e := rules.NewEngine(c, st)
	usage := rules.Usage{Model: "large", Input: 300, Output: 200}
	for _, meter := range []string{"units", "money"} {
		b.Run("meter="+meter, func(b *testing.B) {
			req := rules.Request{Domain: "llm", HitsAddend: 600, Model: "large", Descriptors: []rules.Descriptor{desc("api_key=k", "meter="+meter)}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := e.Decide(ctx, req)
				if err != nil || resp.Code != rules.OK {
					b.Fatalf("Decide: %v %v", resp.Code, err)
				}
				err = resp.Ledger().Settle(ctx, func(m int) (int64, bool) {
					if p := resp.Prices(m); p != nil {
						return p.Cost(usage), true
					}
					return usage.Units(), true
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
