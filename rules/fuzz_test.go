package rules_test

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/bouncerhq/bouncer/rules"
)

// FuzzParse feeds the config parser arbitrary bytes: it must return a
// config or a *ConfigError with problems, never panic, and stay fast
// (nested aliases are bounded). Requests against configs are fuzzed
// through the JSON API (jsonapi.FuzzCheck).
func FuzzParse(f *testing.F) {
	for _, path := range []string{"testdata/envoy.yaml", "testdata/native.yaml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    value: b*\n    share_threshold: true\n    rate_limit: {unit: second, requests_per_unit: 0}\n"))
	f.Add([]byte("domain: d\nrules:\n  - name: r\n    match: [{key: a, value: x*, share: true}]\n    limits: [{rate: 1, period: 1d}]\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: p\n    value: /a/*/b*c\n    metadata: {n: &m [1, {k: yes}], again: *m}\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"))
	f.Add([]byte("[1, 2]"))
	f.Add([]byte("domain: &a d\ndescriptors: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := rules.Parse("f.yaml", data)
		if err != nil {
			var ce *rules.ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("got %v, want a *ConfigError with problems", err)
			}
			return
		}
		// Every limit of a valid config is a valid limit.
		for _, d := range c.Domains() {
			for _, r := range d.Rules {
				ls := slices.Clone(r.Limits)
				for _, p := range r.Plans {
					ls = append(ls, p.Limits...)
				}
				for _, l := range ls {
					if err := l.Validate(); err != nil {
						t.Fatalf("a config that parsed holds an invalid limit, %s:%d: %v", r.File, r.Line, err)
					}
				}
			}
		}
	})
}
