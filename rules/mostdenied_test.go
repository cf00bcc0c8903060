package rules_test

import (
	"context"
	"testing"

	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

// The key index counts each key's denials; MostDenied lists the most
// denied first, and never a key that was not denied.
func TestMostDenied(t *testing.T) {
	c, err := rules.Parse("d.yaml", []byte("domain: d\nrules:\n  - name: per_user\n    match: [{key: user}]\n    limits: [{rate: 1, period: 1h, algorithm: fixed_window}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	defer st.Close()
	e := rules.NewEngine(c, st)
	e.Keys = rules.NewKeyIndex(100)
	for user, n := range map[string]int{"a": 4, "b": 2, "c": 1} {
		for range n {
			if _, err := e.Decide(context.Background(), rules.Request{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "user", Value: user}}}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := e.Keys.MostDenied(10)
	if len(got) != 2 || got[0].Denied != 3 || got[1].Denied != 1 || got[0].Entries[0].Value != "a" || got[1].Entries[0].Value != "b" {
		t.Fatalf("MostDenied = %+v, want a (3 denials) then b (1); c was never denied", got)
	}
	if one := e.Keys.MostDenied(1); len(one) != 1 || one[0].Entries[0].Value != "a" {
		t.Fatalf("MostDenied(1) = %+v, want a alone", one)
	}
}
