package rules_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer/rules"
)

// A descriptor's metadata (envoyproxy/ratelimit's format, as its main has
// it) is read whole onto its rule; one that is not a mapping is refused at
// its line.
func TestDescriptorMetadata(t *testing.T) {
	c, err := rules.Parse("c.yaml", []byte(`domain: d
descriptors:
  - key: svc
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata:
      name: service_1
      route: {weight: 2, canary: no, since: 2026-01-01}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "service_1", "route": map[string]any{"weight": 2, "canary": false, "since": "2026-01-01"}}
	if got := c.Domain("d").Rules[0].Metadata; !reflect.DeepEqual(got, want) {
		t.Errorf("metadata: got %#v, want %#v", got, want)
	}
	_, err = rules.Parse("c.yaml", []byte("domain: d\ndescriptors:\n  - key: svc\n    metadata: one\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"))
	if want := `c.yaml:4: descriptors[0].metadata: want a mapping, got "one"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a scalar: got %v, want %q", err, want)
	}
}
