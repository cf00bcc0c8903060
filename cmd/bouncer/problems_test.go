package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer/rules"
)

// problemLine matches a logged config problem: its file, line and reason
// on a line of its own.
var problemLine = regexp.MustCompile(`level=ERROR msg="config problem" file=(\S+) line=(\d+) reason=`)

// checkProblemLines checks that logs hold each of want (a "file:line"
// each) on a line of its own, then summary on a line of its own, and
// that no line escapes a newline.
func checkProblemLines(t *testing.T, logs, summary string, want ...string) {
	t.Helper()
	var got []string
	sawSummary := false
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `\n`) {
			t.Errorf("a line escapes a newline: %q", line)
		}
		if strings.Contains(line, summary) {
			sawSummary = true
		}
		if m := problemLine.FindStringSubmatch(line); m != nil {
			if sawSummary {
				t.Errorf("problem %q logged after %q, want it before", line, summary)
			}
			got = append(got, m[1]+":"+m[2])
		}
	}
	if !sawSummary {
		t.Errorf("logs:\n%s\nwant a line %q", logs, summary)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("logs:\n%s\nlogged problems at %q, want %q, one a line", logs, got, want)
	}
}

// A config refused at start is logged one problem a line, with its file,
// line and reason: serve's rules and the gateway's own file.
func TestStartLogsEachProblem(t *testing.T) {
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.yaml")
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(rulesFile, "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 2}\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: -1}\n")
	gatewayFile := filepath.Join(dir, "gateway.yaml")
	write(gatewayFile, "listeners: [{addr: \"127.0.0.1:0\"}]\nroutez: []\nadmn: 127.0.0.1:0\n")

	code, _, stderr := runArgs(t, "serve", "--config", rulesFile, "--grpc-addr", "127.0.0.1:0", "--http-addr", "", "--admin-addr", "")
	if code != exitFail {
		t.Errorf("serve: exit code %d, want %d", code, exitFail)
	}
	checkProblemLines(t, stderr, `msg="cannot start: the config has problems" problems=2`, rulesFile+":4", rulesFile+":6")

	code, _, stderr = runArgs(t, "gateway", "--config", gatewayFile)
	if code != exitFail {
		t.Errorf("gateway: exit code %d, want %d", code, exitFail)
	}
	checkProblemLines(t, stderr, `msg="cannot start: the config has problems" problems=2`, gatewayFile+":2", gatewayFile+":3")
}

// A rejected reload is logged as a start is: the rejection, then one
// problem a line.
func TestReloadLogsEachProblem(t *testing.T) {
	var b bytes.Buffer
	a := &app{log: newLogger(&b, "text", slog.LevelInfo)}
	a.logReload(rules.ReloadResult{Outcome: rules.Rejected, Config: &rules.Config{Version: "v1"}, Problems: []rules.Problem{
		{File: "a.yaml", Line: 3, Reason: "rules[0].limits[0].rate: must be a number"},
		{File: "b.yaml", Line: 9, Reason: "rules[1].name: required"},
	}})
	checkProblemLines(t, b.String(), `msg="config rejected; the old one keeps serving" version=v1 problems=2`, "a.yaml:3", "b.yaml:9")
	if !strings.Contains(b.String(), `reason="rules[1].name: required"`) {
		t.Errorf("logs:\n%s\nwant each problem's reason", b.String())
	}
}
