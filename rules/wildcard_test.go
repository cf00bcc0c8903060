package rules_test

import "testing"

// A '*' matches any run of characters wherever it stands in a value, as
// in envoyproxy/ratelimit since it took non-trailing wildcards (after
// the version the differential test pins): patterns are tried in file
// order after the exact value and before the key alone, and
// share_threshold makes every value a pattern matches one count.
func TestWildcardsAnywhere(t *testing.T) {
	const envoy = `domain: d
descriptors:
  - key: path
    value: /api/*/resource/*/action
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value: /api/exact/action
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: "*/shared"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 9}
`
	const native = `domain: d
rules:
  - name: resource
    match: [{key: path, value: /api/*/resource/*/action}]
    limits: [{rate: 2, period: 1m}]
  - name: action
    match: [{key: path, value: /api/*/action}]
    limits: [{rate: 1, period: 1m}]
  - name: exact
    match: [{key: path, value: /api/exact/action}]
    limits: [{rate: 3, period: 1m}]
  - name: shared
    match: [{key: path, value: "*/shared", share: true}]
    limits: [{rate: 2, period: 1m}]
  - name: any
    match: [{key: path}]
    limits: [{rate: 9, period: 1m}]
`
	for name, config := range map[string]string{"envoyproxy/ratelimit format": envoy, "Bouncer's format": native} {
		t.Run(name, func(t *testing.T) {
			e, _, _ := engineFor(t, config)
			steps := []struct{ value, want string }{
				{"/api/123/action", "OK: OK/0"}, // limit 1
				{"/api/123/action", "OVER_LIMIT: OVER_LIMIT/0"},
				{"/api/456/action", "OK: OK/0"},           // another value, its own count
				{"/api//action", "OK: OK/0"},              // '*' matches nothing too
				{"/api/exact/action", "OK: OK/2"},         // the exact value first
				{"/api/v1/resource/7/action", "OK: OK/1"}, // the first pattern in file order that fits (/api/*/action fits too)
				{"/api/123/other", "OK: OK/8"},            // no pattern: the key alone
				{"/apiaction", "OK: OK/8"},                // the parts may not overlap
				{"a/shared", "OK: OK/1"},                  // shared: one count for every value
				{"b/c/shared", "OK: OK/0"},
				{"/shared", "OVER_LIMIT: OVER_LIMIT/0"},
			}
			for i, s := range steps {
				if got := codes(decide(t, e, "d", desc("path="+s.value))); got != s.want {
					t.Errorf("step %d, %s: got %q, want %q", i, s.value, got, s.want)
				}
			}
		})
	}
}
