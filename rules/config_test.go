package rules_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/rules"
)

func TestConfigErrors(t *testing.T) {
	cases := map[string]struct {
		yaml string
		want []string // "line: reason fragment"
	}{
		"unknown field": {
			"domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      burts: 3\n",
			[]string{`7: descriptors[0].rate_limit: unknown field "burts"`},
		},
		"bad unit and negative limit": {
			"domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: -1\n",
			[]string{"5: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'", "6: descriptors[0].rate_limit.requests_per_unit: -1"},
		},
		"duplicate descriptor": {
			"domain: d\ndescriptors:\n  - key: a\n    value: x\n  - key: a\n    value: x\n",
			[]string{"5: duplicate descriptor composite key 'd.a_x'"},
		},
		"unreachable wildcard": {
			"domain: d\ndescriptors:\n  - key: a\n    value: fo*\n  - key: a\n    value: foo*\n",
			[]string{"5: descriptor 'd.a_foo*' is unreachable"},
		},
		"unlimited with a unit": {
			"domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n",
			[]string{"5: should not specify rate limit unit when unlimited"},
		},
		"bouncer fields without opting in": {
			"domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: gcra\n",
			[]string{"5: algorithm, burst, shape, on_store_error, charge_denied and mode need 'semantics: bouncer'"},
		},
		"native: bad duration": {
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 1, period: 1 minute}\n",
			[]string{`6: rules[0].limits[0].period: bad duration "1 minute"`},
		},
		"native: a calendar period that is none": {
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 1, period: calendar_year}\n",
			[]string{`6: rules[0].limits[0].period: unknown calendar period "calendar_year"`},
		},
		"native: calendar periods": {
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 1, period: calendar_month, timezone: Mars/Olympus}\n      - {rate: 1, period: calendar_month, anchor: 32}\n      - {rate: 1, period: 1d, timezone: Europe/Paris}\n      - {rate: 1, period: calendar_day, algorithm: token_bucket}\n      - {rate: 1, period: calendar_week, anchor: 8}\n      - {rate: 1, period: 1h, anchor: 3}\n",
			[]string{`6: rules[0].limits[0].timezone: unknown time zone "Mars/Olympus"`, "7: rules[0].limits[1].anchor: a calendar_month's anchor is a day of the month, 1 to 31, got 32", "8: rules[0].limits[2].timezone: only a calendar period", "9: rules[0].limits[3].algorithm: a calendar_day limit counts in fixed windows", "10: rules[0].limits[4].anchor: a calendar_week's anchor is a weekday", "11: rules[0].limits[5].anchor: only a calendar period"},
		},
		"native: overrides": {
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{name: day, rate: 5, period: 1d}]\n    overrides:\n      week: {max: 9}\n      day: {min: 9, max: 2}\n  - name: s\n    match: [{key: b}]\n    limits: [{name: day, rate: 5, period: 1d}]\n    overrides:\n      day: {max: lots}\n",
			[]string{`7: rules[0].overrides.week: the rule has no limit named "week"`, "8: rules[0].overrides.day: want 1 ≤ min ≤ max, got min 9, max 2", `13: rules[1].overrides.day.max: want a whole rate from 1 to 1099511627776, got "lots"`},
		},
		"native: a calendar section without keys": {
			"domain: d\ncalendar: {}\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: calendar_month}]\n",
			[]string{"2: calendar: name anchor_key"},
		},
		"native: a calendar section with one key twice": {
			"domain: d\ncalendar: {anchor_key: x, zone_key: x}\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: calendar_month}]\n",
			[]string{`2: calendar: anchor_key and zone_key name one entry, "x"`},
		},
		"native: unknown algorithm, zero rate, burst on a window": {
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 1, period: 1s, algorithm: magic}\n      - {rate: 0, period: 1s}\n      - {rate: 1, period: 1s, burst: 2, algorithm: fixed_window}\n",
			[]string{"6: rules[0].limits[0].algorithm", "7: rules[0].limits[1].rate: ", "8: rules[0].limits[2].burst: "},
		},
		"native: concurrency, a rule replacing itself": {
			"domain: d\nrules:\n  - name: r\n    replaces: [r]\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s, algorithm: concurrency}]\n",
			[]string{"6: rules[0].limits[0].algorithm: concurrency limits need a release", `3: rule "r" replaces itself`},
		},
		"native: share set one way, then the other": {
			"domain: d\nrules:\n  - name: r\n    match: [{key: a, value: x*, share: true}, {key: b}]\n    limits: [{rate: 1, period: 1s}]\n  - name: s\n    match: [{key: a, value: x*}, {key: c}]\n    limits: [{rate: 1, period: 1s}]\n",
			[]string{"7: rules[1].match[0]: share is false here but true"},
		},
		"native: two rules, one match": {
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s}]\n  - name: s\n    match: [{key: a}]\n    limits: [{rate: 2, period: 1s}]\n",
			[]string{`6: rules[1]: rule "s" matches the same descriptors as rule "r" (line 3)`},
		},
		"native: duplicate names, wrong types": {
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: many, period: 1s}]\n  - name: r\n    shadow: maybe\n    match: [{key: b}]\n    limits: [{rate: 1, period: 1s}]\n",
			[]string{`5: rules[0].limits[0].rate: want a whole number, got "many"`, `7: rules[1].shadow: want a boolean, got "maybe"`},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := rules.Parse("c.yaml", []byte(c.yaml))
			var ce *rules.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), "c.yaml:"+w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, "c.yaml:"+w)
				}
			}
		})
	}
}

func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: one\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: two\nrules:\n  - name: r\n    match: [{key: k}]\n    limits: [{rate: 1, period: 1s}]\n")
	write(".hidden.yaml", "not: [valid")
	write("notes.txt", "ignored")
	c, err := rules.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(c.Domains()); got != 2 || c.Domain("one") == nil || c.Domain("two") == nil {
		t.Fatalf("got %d domains, want one and two", got)
	}
	if c.Domain("one").Semantics != rules.EnvoySemantics || c.Domain("two").Semantics != rules.BouncerSemantics {
		t.Errorf("semantics: got %v and %v", c.Domain("one").Semantics, c.Domain("two").Semantics)
	}
	write("c.yaml", "domain: one\ndescriptors: []\n")
	if _, err := rules.Load(dir); err == nil || !strings.Contains(err.Error(), "duplicate domain 'one'") {
		t.Errorf("duplicate domain: got %v", err)
	}
}

func TestRequestBounds(t *testing.T) {
	e, _ := newEngine(t, "testdata/envoy.yaml")
	long := strings.Repeat("x", rules.MaxValueLen+1)
	many := make([]rules.Descriptor, rules.MaxDescriptors+1)
	for i := range many {
		many[i] = desc("user_id=a")
	}
	bad := map[string]rules.Request{
		"no domain":        {Descriptors: ds(desc("a=b"))},
		"no descriptors":   {Domain: "edge"},
		"too many":         {Domain: "edge", Descriptors: many},
		"value too long":   {Domain: "edge", Descriptors: ds(desc("user_id=" + long))},
		"hits too large":   {Domain: "edge", HitsAddend: rules.MaxHits + 1, Descriptors: ds(desc("a=b"))},
		"override no unit": {Domain: "edge", Descriptors: []rules.Descriptor{{Entries: desc("a=b").Entries, Limit: &rules.Override{RequestsPerUnit: 1}}}},
	}
	for name, r := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := e.Decide(t.Context(), r); !errors.Is(err, bouncer.ErrInvalidRequest) {
				t.Errorf("got %v, want ErrInvalidRequest", err)
			}
		})
	}
	// A long value within the bound is counted under a digest.
	resp := decide(t, e, "edge", desc("user_id="+strings.Repeat("v", 1000)))
	if k := resp.Statuses[0].Key; len(k) > 200 || strings.Contains(k, "vvvv") {
		t.Errorf("key for a 1000-byte value: got %d bytes %q, want a bounded digest", len(k), k)
	}
}

func TestQuotaModeUnderBouncerSemantics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.yaml")
	if err := os.WriteFile(path, []byte("domain: q\nsemantics: bouncer\ndescriptors:\n  - key: a\n    quota_mode: true\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, _ := newEngine(t, path)
	decide(t, e, "q", desc("a=1"))
	resp := decide(t, e, "q", desc("a=1"))
	st := resp.Statuses[0]
	if resp.Code != rules.OK || !st.Shadowed || st.ResetAfter != 0 {
		t.Errorf("over a quota-mode limit: got code %v shadowed %v reset %v, want OK, shadowed, no reset", resp.Code, st.Shadowed, st.ResetAfter)
	}
}

// Nested aliases that would expand to billions of values are refused,
// quickly, rather than decoded.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - &a0 {key: k0}\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "  - &a%d {key: k%d, descriptors: [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]}\n")
	}
	_, err := rules.Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Errorf("got %v, want the file refused as too large", err)
	}
}
