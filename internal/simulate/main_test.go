package simulate

import (
	"bytes"
	"fmt"
	"testing"
)

// The exit codes bouncer simulate gives, as cmd/bouncer wires Parse and Run.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// runArgs runs a simulate command line as cmd/bouncer does ("simulate"
// first, as on bouncer's command line), and returns its exit code, stdout
// and stderr.
func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if len(args) == 0 || args[0] != "simulate" {
		t.Fatalf("runArgs(%q): want \"simulate\" first", args)
	}
	var out, errOut bytes.Buffer
	sim, err := Parse(args[1:])
	if err != nil {
		fmt.Fprintf(&errOut, "bouncer simulate: %v\n", err)
		return exitUsage, out.String(), errOut.String()
	}
	for _, n := range sim.Notes() {
		fmt.Fprintf(&errOut, "bouncer simulate: note: %s\n", n)
	}
	if err := sim.Run(&out); err != nil {
		fmt.Fprintf(&errOut, "bouncer simulate: %v\n", err)
		return exitFail, out.String(), errOut.String()
	}
	return exitOK, out.String(), errOut.String()
}
