package admin_test

import (
	"testing"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

// BenchmarkDecideKeyIndex decides one key below its limit with the key
// index on, as bouncer serve runs by default (--admin-keys).
func BenchmarkDecideKeyIndex(b *testing.B) {
	c, err := rules.Parse("d.yaml", []byte("domain: d\nrules:\n  - name: per_user\n    match: [{key: user}]\n    limits: [{rate: 1000000000, period: 1s}]\n"))
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	defer st.Close()
	e := rules.NewEngine(c, st)
	e.Keys = admin.NewKeyIndex(1000)
	r := rules.Request{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "user", Value: "u"}}}}}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := e.Decide(b.Context(), r)
		if err != nil || resp.Code != rules.OK {
			b.Fatalf("Decide: %v, %v; want OK", resp.Code, err)
		}
	}
}
