package rules

import (
	"strings"
	"testing"
)

func TestKeyOfEscapes(t *testing.T) {
	cases := []struct {
		parts []string
		want  string
	}{
		{[]string{"api", "user", "42"}, "api:user:42"},
		{[]string{"a:b"}, "a%3Ab"},
		{[]string{"{tag}"}, "%7Btag%7D"},
		{[]string{"line\nbreak\r"}, "line%0Abreak%0D"},
		{[]string{"100%", "#x"}, "100%25:%23x"},
		{[]string{"nul\x00del\x7f"}, "nul%00del%7F"},
		{[]string{""}, ""},
		{[]string{"", ""}, ":"},
	}
	for _, c := range cases {
		if got := keyOf(c.parts...); got != c.want {
			t.Errorf("keyOf(%q) = %q, want %q", c.parts, got, c.want)
		}
	}
}

func TestKeyOfBoundsLongParts(t *testing.T) {
	long := strings.Repeat("x", 64<<10)
	k := keyOf("rule", long)
	if len(k) != len("rule:#")+64 || !strings.HasPrefix(k, "rule:#") {
		t.Fatalf("keyOf(rule, 64 KiB) = %q (%d bytes), want rule:# and 64 hex digits", k[:min(len(k), 80)], len(k))
	}
	if keyOf("rule", long+"y") == k {
		t.Fatal("two long parts that differ in their last byte give one key")
	}
	// A part that only grows past the bound by escaping is hashed too.
	colons := strings.Repeat(":", MaxKeyPart/3+1)
	if k := keyOf(colons); !strings.HasPrefix(k, "#") || len(k) != 65 {
		t.Fatalf("keyOf(%d colons) = %q, want a digest", len(colons), k)
	}
	exact := strings.Repeat("y", MaxKeyPart)
	if got := keyOf(exact); got != exact {
		t.Fatalf("a part of exactly MaxKeyPart bytes was changed: %q", got)
	}
}

// Distinct lists of parts give distinct keys, and no key carries a
// brace, a line break, or more separators than its parts need.
func TestKeyOfIsOneToOne(t *testing.T) {
	alphabet := []string{"", "a", ":", "%", "#", "{", "}", "%3A", "#a", "\n", "a:b", strings.Repeat("z", MaxKeyPart+1)}
	seen := map[string][]string{}
	var walk func(prefix []string, depth int)
	walk = func(prefix []string, depth int) {
		if depth == 0 {
			return
		}
		for _, a := range alphabet {
			parts := append(append([]string(nil), prefix...), a)
			k := keyOf(parts...)
			if prev, ok := seen[k]; ok {
				t.Fatalf("keyOf(%q) = keyOf(%q) = %q", parts, prev, k)
			}
			seen[k] = parts
			if strings.ContainsAny(k, "{}\n") || strings.Count(k, ":") != len(parts)-1 {
				t.Fatalf("keyOf(%q) = %q: a brace, a line break or a stray separator", parts, k)
			}
			walk(parts, depth-1)
		}
	}
	walk(nil, 3)
	if len(seen) < 12*12*12 {
		t.Fatalf("only %d keys checked", len(seen))
	}
}
