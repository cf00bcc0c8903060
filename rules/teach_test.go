package rules_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer/rules"
)

// TestConfigErrorsTeach asserts whole messages: each names the line of
// the mistake, its field, the reason and what is valid, once.
func TestConfigErrorsTeach(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{
			"misspelt rules",
			"domain: d\nplans:\n  key: plan\nclient_ip:\n  keys: [ip]\nrulez:\n  - name: r\n",
			[]string{
				`c.yaml:2: top level: unknown field "plans": Bouncer's format has it, envoyproxy/ratelimit's does not`,
				`c.yaml:4: top level: unknown field "client_ip": Bouncer's format has it, envoyproxy/ratelimit's does not`,
				`c.yaml:6: top level: unknown field "rulez" (did you mean rules?); read as envoyproxy/ratelimit's format: the file has no top-level rules`,
			},
		},
		{
			"neither rules nor descriptors",
			"domain: d\nlimits: []\nplans: {key: p}\n",
			[]string{
				`c.yaml:2: top level: unknown field "limits" (known: descriptors, domain, semantics); read as envoyproxy/ratelimit's format: the file has no top-level rules`,
				`c.yaml:3: top level: unknown field "plans": Bouncer's format has it, envoyproxy/ratelimit's does not`,
			},
		},
		{
			"misspelt field",
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s, brust: 2}]\n",
			[]string{`c.yaml:5: rules[0].limits[0]: unknown field "brust" (did you mean burst?)`},
		},
		{
			"unknown algorithm on a rule, once at its line",
			"domain: d\nrules:\n  - name: r\n    algorithm: tokenbucket\n    match: [{key: a}]\n    limits:\n      - {rate: 1, period: 1s}\n      - {rate: 2, period: 1m}\n      - {rate: 3, period: 1h, algorithm: gcra}\n",
			[]string{`c.yaml:4: rules[0].algorithm: unknown algorithm "tokenbucket" (did you mean token_bucket?); want one of token_bucket, gcra, leaky_bucket, fixed_window, sliding_window_log, sliding_window_counter`},
		},
		{
			"unknown algorithm on a limit",
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - rate: 1\n        period: 1s\n        algorithm: magic\n",
			[]string{`c.yaml:8: rules[0].limits[0].algorithm: unknown algorithm "magic"; want one of token_bucket, gcra, leaky_bucket, fixed_window, sliding_window_log, sliding_window_counter`},
		},
		{
			"fractional rates",
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 10.5, period: 1s}\n      - {rate: 0.5, period: 1s}\n      - {rate: 0.25, period: 1m}\n      - {rate: 0.3}\n",
			[]string{
				`c.yaml:6: rules[0].limits[0].rate: want a whole number, got 10.5: for 10.5 per 1s write rate: 21, period: 2s`,
				`c.yaml:7: rules[0].limits[1].rate: want a whole number, got 0.5: for 0.5 per 1s write rate: 1, period: 2s`,
				`c.yaml:8: rules[0].limits[2].rate: want a whole number, got 0.25: for 0.25 per 1m write rate: 1, period: 4m`,
				`c.yaml:9: rules[0].limits[3].rate: want a whole number, got 0.3`,
			},
		},
		{
			"a rate written with its period",
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 10/s}\n      - {rate: 10/m, period: 1m}\n      - {rate: 100/5m}\n      - {rate: 10 per second}\n      - {rate: 10 requests per hour}\n      - {rate: 5rps}\n      - {rate: 2 a day}\n      - {rate: 10/fortnight}\n      - {rate: ten}\n",
			[]string{
				`c.yaml:6: rules[0].limits[0].rate: must be a number, got "10/s"; write rate: 10, period: 1s`,
				`c.yaml:7: rules[0].limits[1].rate: must be a number, got "10/m"; write rate: 10, period: 1m`,
				`c.yaml:8: rules[0].limits[2].rate: must be a number, got "100/5m"; write rate: 100, period: 5m`,
				`c.yaml:9: rules[0].limits[3].rate: must be a number, got "10 per second"; write rate: 10, period: 1s`,
				`c.yaml:10: rules[0].limits[4].rate: must be a number, got "10 requests per hour"; write rate: 10, period: 1h`,
				`c.yaml:11: rules[0].limits[5].rate: must be a number, got "5rps"; write rate: 5, period: 1s`,
				`c.yaml:12: rules[0].limits[6].rate: must be a number, got "2 a day"; write rate: 2, period: 1d`,
				`c.yaml:13: rules[0].limits[7].rate: want a whole number, got "10/fortnight"`,
				`c.yaml:14: rules[0].limits[8].rate: want a whole number, got "ten"`,
			},
		},
		{
			"a missing rate or period",
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 10}\n      - {name: b, period: 1m}\n      - {name: c, algorithm: gcra}\n      - {name: d, rate: 10, period: 0s}\n",
			[]string{
				`c.yaml:6: rules[0].limits[0]: period is required: write the time the rate is counted over, such as period: 1s, 1m or 1d`,
				`c.yaml:7: rules[0].limits[1]: rate is required: write the units admitted per period, such as rate: 10`,
				`c.yaml:8: rules[0].limits[2]: rate and period are required: write the units admitted and the time they are counted over, such as rate: 10, period: 1s`,
				`c.yaml:9: rules[0].limits[3].period: must be positive, got 0s`,
			},
		},
		{
			"fractional rate in a plan",
			"domain: d\nplans: {key: plan}\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s}]\n    plans:\n      pro:\n        limits: [{rate: 1.5, period: 1h}]\n",
			[]string{`c.yaml:9: rules[0].plans.pro.limits[0].rate: want a whole number, got 1.5: for 1.5 per 1h write rate: 3, period: 2h`},
		},
		{
			"fractional burst",
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s, burst: 2.5}]\n",
			[]string{`c.yaml:5: rules[0].limits[0].burst: want a whole number, got 2.5`},
		},
		{
			"burst 0, as the library refuses it",
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s, burst: 0}]\n",
			[]string{`c.yaml:5: rules[0].limits[0].burst: must be at least 1, got 0`},
		},
		{
			"burst 0 in envoyproxy/ratelimit's format",
			"domain: d\nsemantics: bouncer\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: gcra, burst: 0}\n",
			[]string{`c.yaml:5: descriptors[0].rate_limit.burst: must be at least 1, got 0`},
		},
		{
			"fractional requests_per_unit",
			"domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1.5\n",
			[]string{`c.yaml:6: descriptors[0].rate_limit.requests_per_unit: want a whole number, got 1.5`},
		},
		{
			"negative requests_per_unit, once",
			"domain: d\nsemantics: bouncer\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: -1\n",
			[]string{`c.yaml:7: descriptors[0].rate_limit.requests_per_unit: -1 is not between 0 and 4294967295`},
		},
		{
			"unknown algorithm in envoyproxy/ratelimit's format",
			"domain: d\nsemantics: bouncer\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: leaky}\n",
			[]string{`c.yaml:5: algorithm: unknown algorithm "leaky"; want one of token_bucket, gcra, leaky_bucket, fixed_window, sliding_window_log, sliding_window_counter`},
		},
		{
			"a missing unit, in a nested descriptor",
			"domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n      - key: c\n        rate_limit:\n          requests_per_unit: 5\n",
			[]string{`c.yaml:8: descriptors[0].descriptors[1].rate_limit.unit: required (or unlimited: true): want second, minute, hour, day, week, month or year`},
		},
		{
			"an unknown unit, at its line",
			"domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 5\n      unit: minutes\n",
			[]string{`c.yaml:6: descriptors[0].rate_limit.unit: invalid rate limit unit 'minutes' (did you mean minute?); want second, minute, hour, day, week, month or year`},
		},
		{
			"an unknown unit, no near name",
			"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 5}\n",
			[]string{`c.yaml:4: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'; want second, minute, hour, day, week, month or year`},
		},
		{
			"a tab in the indentation",
			"domain: d\nrules:\n  - name: r\n\tmatch: [{key: a}]\n",
			[]string{`c.yaml:4: not valid YAML: found a tab character that violates indentation`},
		},
		{
			"an unclosed [",
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}\n    limits: []\n",
			[]string{`c.yaml:4: not valid YAML: did not find expected ',' or ']'`},
		},
		{
			"an unclosed [ on the first line",
			"domain: [d\n",
			[]string{`c.yaml:1: not valid YAML: did not find expected ',' or ']'`},
		},
		{
			"a bad indentation",
			"domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n   limits: []\n",
			[]string{`c.yaml:5: not valid YAML: did not find expected '-' indicator`},
		},
		{
			"a mapping value in a scalar",
			"domain: d\nrules:\n  - name: r: s\n",
			[]string{`c.yaml:3: not valid YAML: mapping values are not allowed in this context`},
		},
		{
			"an unclosed quote",
			"domain: d\nrules:\n  - name: \"r\n    match: [{key: a}]\n",
			[]string{`c.yaml:3: not valid YAML: found unexpected end of stream`},
		},
		{
			"a tab after a multi-line list",
			"domain: d\nrules:\n  - name: r\n    match: [\n      {key: a}]\n    limits: []\n  - name: s\n\tmatch: []\n",
			[]string{`c.yaml:8: not valid YAML: found a tab character that violates indentation`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := rules.Parse("c.yaml", []byte(c.yaml))
			var ce *rules.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.String())
			}
			if g, w := strings.Join(got, "\n"), strings.Join(c.want, "\n"); g != w {
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
		})
	}
}
