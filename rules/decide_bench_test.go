package rules_test

import (
	"context"
	"testing"

	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

// BenchmarkDecide decides one descriptor, always allowed, as the RLS and
// JSON services do: the response's Ledger is never asked for.
func BenchmarkDecide(b *testing.B) {
	c, err := rules.Parse("c.yaml", []byte("domain: d\nrules:\n  - name: u\n    match: [{key: user}]\n    limits: [{rate: 1000000000, period: 1s}]\n"))
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	defer st.Close()
	e := rules.NewEngine(c, st)
	req := rules.Request{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "user", Value: "a"}}}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := e.Decide(ctx, req)
		if err != nil || resp.Code != rules.OK {
			b.Fatalf("got %v, %v; want OK", resp.Code, err)
		}
	}
}
