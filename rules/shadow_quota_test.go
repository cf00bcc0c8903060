package rules_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

// Over its limit, a descriptor in quota_mode answers OK without a
// duration until reset, as envoyproxy/ratelimit does; one in shadow_mode
// as well keeps it, since that project's shadow_mode turns the answer OK
// before quota_mode would take the duration out.
func TestShadowAndQuotaModeOverLimit(t *testing.T) {
	const config = `domain: modes
descriptors:
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: both
    shadow_mode: true
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`
	path := filepath.Join(t.TempDir(), "modes.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key       string
		wantReset time.Duration
	}{
		{"shadow", 50 * time.Second}, // the clock is 10s into a minute
		{"quota", 0},
		{"both", 50 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			e, _ := newEngine(t, path)
			decide(t, e, "modes", desc(tt.key+"=x"))
			resp := decide(t, e, "modes", desc(tt.key+"=x"))
			st := resp.Statuses[0]
			if resp.Code != rules.OK || st.Code != rules.OK || !st.Shadowed {
				t.Errorf("got code %v, status %v, shadowed %v; want OK, OK, shadowed", resp.Code, st.Code, st.Shadowed)
			}
			if st.ResetAfter != tt.wantReset {
				t.Errorf("duration until reset: got %v, want %v", st.ResetAfter, tt.wantReset)
			}
		})
	}
}
