package rules_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

// quota_mode as envoyproxy/ratelimit's main has it since it fixed quota
// results (after the version the differential test pins): a quota-mode
// descriptor over its limit answers OVER_LIMIT with its duration until
// reset, and the request is over the limit when any other descriptor is,
// or when every quota-mode descriptor of it is. shadow_mode turns a
// descriptor's answer OK first, keeping the duration; such a descriptor
// in quota_mode as well counts as one that passed.
func TestShadowAndQuotaModeOverLimit(t *testing.T) {
	const config = `domain: modes
descriptors:
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: both
    shadow_mode: true
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 1}
`
	path := filepath.Join(t.TempDir(), "modes.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		spent []string // each sent once before, so that the request is over their limit
		send  []string
		want  string // the overall code, then each status's code and duration until reset
	}{
		{[]string{"shadow"}, []string{"shadow"}, "OK: OK/50s(shadowed)"}, // the clock is 10s into a minute
		{[]string{"quota"}, []string{"quota"}, "OVER_LIMIT: OVER_LIMIT/50s"},
		{[]string{"both"}, []string{"both"}, "OK: OK/50s(shadowed)"},
		{[]string{"quota"}, []string{"quota", "plain"}, "OVER_LIMIT: OVER_LIMIT/50s OK/50s"},
		{[]string{"quota"}, []string{"quota", "quota2"}, "OK: OVER_LIMIT/50s OK/50s"},
		{[]string{"quota", "quota2"}, []string{"quota", "quota2"}, "OVER_LIMIT: OVER_LIMIT/50s OVER_LIMIT/50s"},
		{[]string{"quota", "both"}, []string{"quota", "both"}, "OK: OVER_LIMIT/50s OK/50s(shadowed)"},
		{[]string{"plain"}, []string{"quota", "plain"}, "OVER_LIMIT: OK/50s OVER_LIMIT/50s"},
		{nil, []string{"quota", "quota2"}, "OK: OK/50s OK/50s"},
	}
	for _, tt := range tests {
		name := strings.Join(tt.spent, "+") + " spent, " + strings.Join(tt.send, "+")
		t.Run(name, func(t *testing.T) {
			e, _ := newEngine(t, path)
			for _, k := range tt.spent {
				decide(t, e, "modes", desc(k+"=x"))
			}
			var ds []rules.Descriptor
			for _, k := range tt.send {
				ds = append(ds, desc(k+"=x"))
			}
			resp := decide(t, e, "modes", ds...)
			got := resp.Code.String() + ":"
			for _, st := range resp.Statuses {
				got += fmt.Sprintf(" %v/%v", st.Code, st.ResetAfter.Round(time.Second))
				if st.Shadowed {
					got += "(shadowed)"
				}
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
