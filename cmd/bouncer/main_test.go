package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// The serve tests start listeners, stores and config watches; all must be
// gone when the service has shut down. rueidis's Cluster client closes
// the connections a topology refresh replaced five seconds later, and
// runs a refresh it delayed after an error (about half a second later),
// in goroutines of their own that outlive the client by design.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		// A test started this binary as `bouncer`: see startProcess.
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// runArgs runs the binary's entry point with args and returns its exit code
// and output.
func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // a substring of stdout, "" for empty stdout
		wantStderr string // a substring of stderr, "" for empty stderr
	}{
		{"no command", nil, exitUsage, "", "no command given"},
		{"unknown command", []string{"serve-all"}, exitUsage, "", `unknown command "serve-all"`},
		{"unknown command lists commands", []string{"nope"}, exitUsage, "", "simulate"},
		{"help", []string{"help"}, exitOK, "simulate", ""},
		{"--help", []string{"--help"}, exitOK, "Usage: bouncer <command>", ""},
		{"help simulate", []string{"help", "simulate"}, exitOK, "--algorithm NAME", ""},
		{"help unknown", []string{"help", "nope"}, exitUsage, "", `unknown command "nope"`},
		{"help two names", []string{"help", "simulate", "simulate"}, exitUsage, "", "at most one"},
		{"simulate -h", []string{"simulate", "-h"}, exitOK, "--traffic KIND", ""},
		{"simulate --help", []string{"simulate", "--help"}, exitOK, "--traffic KIND", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			check := func(stream, got, want string) {
				if want == "" && got != "" {
					t.Errorf("%s: got %q, want nothing", stream, got)
				}
				if !strings.Contains(got, want) {
					t.Errorf("%s: got %q, want it to contain %q", stream, got, want)
				}
			}
			check("stdout", stdout, tt.wantStdout)
			check("stderr", stderr, tt.wantStderr)
		})
	}
}

// TestHelpFlag checks that asking for help, at the top level or of any
// command and in any spelling the flag package takes, prints the help on
// stdout and exits 0: it is what was asked for, not a usage error.
func TestHelpFlag(t *testing.T) {
	var argss [][]string
	for _, h := range []string{"-h", "--help", "-help", "--h", "--help=true"} {
		argss = append(argss, []string{h})
		for _, c := range commands {
			argss = append(argss, []string{c.name, h})
		}
	}
	argss = append(argss,
		[]string{"serve", "--config", "rules.yaml", "--help"},
		[]string{"gateway", "--store", "memory", "-h"},
		[]string{"check", "--mode", "lease", "--help"})
	for _, args := range argss {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(t, args...)
			if code != exitOK {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, exitOK, stderr)
			}
			if stderr != "" {
				t.Errorf("stderr: got %q, want nothing", stderr)
			}
			if !strings.Contains(strings.ToLower(stdout), "usage: bouncer") {
				t.Errorf("stdout: got %q, want the usage", stdout)
			}
		})
	}
	for _, tt := range []struct {
		arg  string
		want bool
	}{{"-h", true}, {"--help", true}, {"-help=false", true}, {"--helpme", false}, {"help", false}, {"-", false}, {"--", false}, {"--config", false}} {
		if got := isHelpFlag(tt.arg); got != tt.want {
			t.Errorf("isHelpFlag(%q): got %v, want %v", tt.arg, got, tt.want)
		}
	}
}

// TestArgsOf asserts that the binary run as ratelimit, as
// envoyproxy/ratelimit's manifests run the image's /bin/ratelimit, is
// bouncer serve, and under any other name reads its command line as it
// is.
func TestArgsOf(t *testing.T) {
	for _, c := range []struct {
		argv, want []string
	}{
		{[]string{"/bin/ratelimit"}, []string{"serve"}},
		{[]string{"ratelimit", "--log-level", "debug"}, []string{"serve", "--log-level", "debug"}},
		{[]string{"/usr/local/bin/bouncer", "version"}, []string{"version"}},
		{[]string{"bouncer"}, []string{}},
		{[]string{"/opt/ratelimit-tools/bouncer", "check", "x.yaml"}, []string{"check", "x.yaml"}},
	} {
		if got := argsOf(c.argv); !slices.Equal(got, c.want) {
			t.Errorf("argsOf(%q): got %q, want %q", c.argv, got, c.want)
		}
	}
}
