package storekey

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestJoinEscapes(t *testing.T) {
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
		if got := Join(c.parts...); got != c.want {
			t.Errorf("Join(%q) = %q, want %q", c.parts, got, c.want)
		}
	}
}

func TestJoinBoundsLongParts(t *testing.T) {
	long := strings.Repeat("x", 64<<10)
	k := Join("rule", long)
	if len(k) != len("rule:#")+64 || !strings.HasPrefix(k, "rule:#") {
		t.Fatalf("Join(rule, 64 KiB) = %q (%d bytes), want rule:# and 64 hex digits", k[:min(len(k), 80)], len(k))
	}
	if Join("rule", long+"y") == k {
		t.Fatal("two long parts that differ in their last byte give one key")
	}
	// A part that only grows past the bound by escaping is hashed too.
	colons := strings.Repeat(":", MaxPart/3+1)
	if k := Join(colons); !strings.HasPrefix(k, "#") || len(k) != 65 {
		t.Fatalf("Join(%d colons) = %q, want a digest", len(colons), k)
	}
	exact := strings.Repeat("y", MaxPart)
	if got := Join(exact); got != exact {
		t.Fatalf("a part of exactly MaxPart bytes was changed: %q", got)
	}
}

// Distinct lists of parts give distinct keys, and no key carries a
// brace, a line break, or more separators than its parts need.
func TestJoinIsOneToOne(t *testing.T) {
	alphabet := []string{"", "a", ":", "%", "#", "{", "}", "%3A", "#a", "\n", "a:b", strings.Repeat("z", MaxPart+1)}
	seen := map[string][]string{}
	var walk func(prefix []string, depth int)
	walk = func(prefix []string, depth int) {
		if depth == 0 {
			return
		}
		for _, a := range alphabet {
			parts := append(append([]string(nil), prefix...), a)
			k := Join(parts...)
			if prev, ok := seen[k]; ok {
				t.Fatalf("Join(%q) = Join(%q) = %q", parts, prev, k)
			}
			seen[k] = parts
			if strings.ContainsAny(k, "{}\n") || strings.Count(k, ":") != len(parts)-1 {
				t.Fatalf("Join(%q) = %q: a brace, a line break or a stray separator", parts, k)
			}
			walk(parts, depth-1)
		}
	}
	walk(nil, 3)
	if len(seen) < 12*12*12 {
		t.Fatalf("only %d keys checked", len(seen))
	}
}

// A key made of long parts holds its bounded size, not its parts' bytes:
// the heap that 1000 keys of 8 parts of 4 KiB keep alive is under
// 1 KiB a key.
func TestJoinHoldsBoundedBytes(t *testing.T) {
	parts := make([]string, 8)
	for i := range parts {
		parts[i] = strings.Repeat(string(rune('a'+i)), 4096)
	}
	keys := make([]string, 1000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keys {
		parts[0] = fmt.Sprint(i, parts[0][len(fmt.Sprint(i)):])
		keys[i] = Join(parts...)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keys)
	if got := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(len(keys)); got > 1024 {
		t.Errorf("a key of 8 parts of 4 KiB (%d bytes long) holds %d bytes of heap, want at most 1024", len(keys[0]), got)
	}
}
