package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind (the reader
// of a bouncer process's output, an HTTP connection).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRunUsage checks the arguments refused before anything is built.
func TestRunUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no command", nil, exitUsage, "usage: image image|release"},
		{"unknown command", []string{"push"}, exitUsage, "usage: image image|release"},
		{"help", []string{"image", "-h"}, exitOK, "-ca-certs"},
		{"unknown flag", []string{"release", "-sign"}, exitUsage, "flag provided but not defined: -sign"},
		{"an argument", []string{"image", "extra"}, exitUsage, `unexpected argument "extra"`},
		{"not semver", []string{"image", "-version", "1.2"}, exitUsage, `-version "1.2": want a semantic version`},
		{"unknown platform", []string{"image", "-platforms", "linux/amd64,windows/amd64"}, exitUsage, `"windows/amd64": want linux/amd64 or linux/arm64`},
		{"empty platform", []string{"release", "-platforms", ""}, exitUsage, `"": want linux/amd64 or linux/arm64`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr: got %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: got %q, want nothing", stdout.String())
			}
		})
	}
}
