package admin_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// indexEngine serves envoyFile from a memory store on a fake clock, with a
// key index of n keys.
func indexEngine(t *testing.T, n int) (*rules.Engine, *admin.KeyIndex, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(storetest.Start.Add(10 * time.Second))
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(config(t, envoyFile), st)
	e.Now = clock.Now
	x := admin.NewKeyIndex(n)
	e.Keys = x
	return e, x, clock
}

func entry(key, value string) []rules.Entry { return []rules.Entry{{Key: key, Value: value}} }

func TestKeyIndex(t *testing.T) {
	e, x, clock := indexEngine(t, 3)
	for i := range 4 {
		_, err := e.Decide(t.Context(), rules.Request{Domain: "edge", Descriptors: []rules.Descriptor{
			{Entries: entry("zone", fmt.Sprintf("u%d", i))}, {Entries: entry("internal", "1")}, {Entries: entry("nope", "1")}}})
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	if got := x.Len(); got != 3 {
		t.Fatalf("index holds %d keys, want its bound 3 (unlimited and unmatched descriptors are not counted keys)", got)
	}
	page, more := x.List("", 2)
	if len(page) != 2 || !more {
		t.Fatalf("first page: got %d keys, more %v; want 2 and more", len(page), more)
	}
	rest, more := x.List(page[1].Key, 2)
	if len(rest) != 1 || more {
		t.Fatalf("second page: got %d keys, more %v; want 1 and no more", len(rest), more)
	}
	seen := map[string]bool{}
	for _, k := range append(page, rest...) {
		seen[k.Entries[0].Value] = true
		if k.Rule == nil || k.Rule.Path != "zone" || k.Domain != "edge" {
			t.Errorf("key %q: got rule %v domain %q, want zone in edge", k.Key, k.Rule, k.Domain)
		}
		if want := storetest.Start.Add(10 * time.Second).Add(time.Duration(k.Entries[0].Value[1]-'0') * time.Second); !k.LastSeen.Equal(want) {
			t.Errorf("key %q: last seen %v, want %v", k.Key, k.LastSeen, want)
		}
	}
	if seen["u0"] || !seen["u1"] || !seen["u2"] || !seen["u3"] {
		t.Errorf("keys held: got %v, want u1..u3 (u0, first seen longest ago, forgotten)", seen)
	}
}

// The index keeps long client values cut short, so that it stays small
// whatever clients send; the key stays exact.
func TestKeyIndexBoundsValues(t *testing.T) {
	e, x, _ := indexEngine(t, 10)
	resp := hit(t, e, entry("zone", strings.Repeat("v", rules.MaxValueLen))...)
	keys, _ := x.List("", 10)
	if len(keys) != 1 {
		t.Fatalf("got %d keys, want 1", len(keys))
	}
	if v := keys[0].Entries[0].Value; len(v) > 80 || !strings.HasSuffix(v, "…") {
		t.Errorf("kept value: %d bytes %q, want it cut short", len(v), v)
	}
	if keys[0].Key != resp.Statuses[0].Key {
		t.Errorf("key: got %q, want the exact store key %q", keys[0].Key, resp.Statuses[0].Key)
	}
}

// The key index counts each key's denials; MostDenied lists the most
// denied first, and never a key that was not denied.
func TestMostDenied(t *testing.T) {
	e, x, _ := indexEngine(t, 100)
	for user, n := range map[string]int{"a": 4, "b": 2, "c": 1} {
		for range n {
			hit(t, e, entry("zone", user)...)
		}
	}
	got := x.MostDenied(10)
	if len(got) != 2 || got[0].Denied != 3 || got[1].Denied != 1 || got[0].Entries[0].Value != "a" || got[1].Entries[0].Value != "b" {
		t.Fatalf("got %+v, want a (3 denials) then b (1)", got)
	}
	if one := x.MostDenied(1); len(one) != 1 || one[0].Entries[0].Value != "a" {
		t.Errorf("MostDenied(1): got %+v, want a only", one)
	}
}
