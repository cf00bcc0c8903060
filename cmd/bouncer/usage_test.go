package main

import (
	"bytes"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// singleDash matches a line that names a flag in Go's -flag form.
var singleDash = regexp.MustCompile(`^\s*-[A-Za-z]`)

func TestHelpPrintsDoubleDashFlags(t *testing.T) {
	tests := []struct {
		command string
		want    []string // substrings of the help
	}{
		{"serve", []string{"\n  --config string\n", "\n  --grpc-addr string\n", `(default "127.0.0.1:8081")`, "(env BOUNCER_CONFIG)", "\n  --watch\n", "(default true)"}},
		{"gateway", []string{"\n  --config ", "\n  --store-timeout duration\n", "(env BOUNCER_STORE)"}},
		{"simulate", []string{"--algorithm NAME"}},
		{"check", []string{"bouncer check [--mode strict|lease|async] [--on-store-error local|allow|deny] [--regions N] CONFIG"}},
		{"version", []string{"bouncer version"}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, "help", tt.command)
			if code != exitOK {
				t.Fatalf("exit code: got %d, want %d (stderr %q)", code, exitOK, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("got\n%s\nwant it to contain %q", stdout, w)
				}
			}
			for line := range strings.Lines(stdout) {
				if singleDash.MatchString(line) {
					t.Errorf("line %q: names a flag with one dash, want --", line)
				}
			}
		})
	}
}

// TestPrintFlagsMatchesPrintDefaults checks that printFlags says what
// flag.PrintDefaults says, but for the second dash.
func TestPrintFlagsMatchesPrintDefaults(t *testing.T) {
	sets := map[string]func() *flag.FlagSet{
		"serve":   func() *flag.FlagSet { var c serveConfig; return serveFlags(&c, io.Discard) },
		"gateway": func() *flag.FlagSet { var c serveConfig; return gatewayFlags(&c, io.Discard) },
		"kinds": func() *flag.FlagSet {
			fs := flag.NewFlagSet("kinds", flag.ContinueOnError)
			fs.String("empty", "", "a string without a default")
			fs.String("addr", "127.0.0.1:80", "a string with one")
			fs.Bool("off", false, "a bool, false")
			fs.Bool("on", true, "a bool, true")
			fs.Int("zero", 0, "an int, 0")
			fs.Int("count", 3, "an int with a `N` placeholder")
			fs.Duration("wait", time.Second, "a duration")
			fs.Float64("ratio", 0.5, "a float")
			fs.Func("each", "a func flag", func(string) error { return nil })
			fs.String("lines", "x", "a usage\nover two lines")
			return fs
		},
	}
	dash := regexp.MustCompile(`(?m)^  -`)
	for name, newSet := range sets {
		t.Run(name, func(t *testing.T) {
			var want, got bytes.Buffer
			fs := newSet()
			fs.SetOutput(&want)
			fs.PrintDefaults()
			printFlags(&got, newSet())
			if w := dash.ReplaceAllString(want.String(), "  --"); got.String() != w {
				t.Errorf("got\n%s\nwant\n%s", got.String(), w)
			}
		})
	}
}
