// Package browsertest finds the headless Chromium that tests render pages
// and charts in.
package browsertest

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium returns the path of a Chromium binary, skipping t if there is
// none, or failing it under BOUNCER_REQUIRE_BROWSER (make test sets it
// after scripts/chromium-up.sh installed one).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("BOUNCER_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium or chromium-browser on PATH, and BOUNCER_REQUIRE_BROWSER is set (scripts/chromium-up.sh installs one)")
	}
	t.Skip("no chromium or chromium-browser on PATH (scripts/chromium-up.sh installs one)")
	return ""
}
