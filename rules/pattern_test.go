package rules

import (
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// A pattern matches exactly what the regular expression with each '*' as
// ".*" matches, for patterns and values over a small alphabet, where
// parts repeat and overlap often.
func TestPatternMatchesAsARegexp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringOfN(rapid.RuneFrom([]rune("ab*")), 1, 8, -1).Draw(t, "pattern")
		if !isPattern(text) {
			text += "*"
		}
		v := rapid.StringOfN(rapid.RuneFrom([]rune("ab")), 0, 10, -1).Draw(t, "value")
		p := newPattern(text)
		parts := strings.Split(text, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		if got, want := p.matches(v), re.MatchString(v); got != want {
			t.Fatalf("pattern %q, value %q: matches %v, want %v", text, v, got, want)
		}
		if p.String() != text {
			t.Fatalf("String: got %q, want %q", p.String(), text)
		}
	})
}

// covers never claims more than it knows: whatever a pattern it says is
// covered matches, the covering one matches too.
func TestPatternCovers(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.StringOfN(rapid.RuneFrom([]rune("ab*")), 1, 6, -1)
		p, q := newPattern(gen.Draw(t, "p")+"*"), newPattern(gen.Draw(t, "q")+"*")
		if !p.covers(q) {
			return
		}
		v := rapid.StringOfN(rapid.RuneFrom([]rune("ab")), 0, 10, -1).Draw(t, "value")
		if q.matches(v) && !p.matches(v) {
			t.Fatalf("%v covers %v, but %q matches only the latter", p, q, v)
		}
	})
}
