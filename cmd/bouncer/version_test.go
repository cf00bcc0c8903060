package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/metrics"
)

func TestVersionCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // a substring of stdout, "" for empty stdout
		wantStderr string // a substring of stderr, "" for empty stderr
	}{
		{"go version", []string{"version"}, exitOK, "go:      " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n", ""},
		{"-h", []string{"version", "-h"}, exitOK, "usage: bouncer version", ""},
		{"--help", []string{"version", "--help"}, exitOK, "usage: bouncer version", ""},
		{"help version", []string{"help", "version"}, exitOK, "usage: bouncer version", ""},
		{"listed in help", []string{"help"}, exitOK, "  version ", ""},
		{"an argument", []string{"version", "--short"}, exitUsage, "", `unexpected argument "--short"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			for _, s := range []struct{ stream, got, want string }{{"stdout", stdout, tt.wantStdout}, {"stderr", stderr, tt.wantStderr}} {
				if s.want == "" && s.got != "" {
					t.Errorf("%s: got %q, want nothing", s.stream, s.got)
				}
				if !strings.Contains(s.got, s.want) {
					t.Errorf("%s: got %q, want it to contain %q", s.stream, s.got, s.want)
				}
			}
		})
	}
}

// TestVersionOutputShape checks that `bouncer version` prints its four
// lines, in order, whatever the build.
func TestVersionOutputShape(t *testing.T) {
	_, stdout, _ := runArgs(t, "version")
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	keys := []string{"version: ", "commit:  ", "time:    ", "go:      "}
	if len(lines) != len(keys) {
		t.Fatalf("got %d lines %q, want %d", len(lines), stdout, len(keys))
	}
	for i, k := range keys {
		if !strings.HasPrefix(lines[i], k) || len(lines[i]) == len(k) {
			t.Errorf("line %d: got %q, want %q and a value", i+1, lines[i], k)
		}
	}
	// A test binary, as one from go run, has no module version; the
	// output says why rather than printing a bare (devel).
	if metrics.ReadBuild().Version == "(devel)" && !strings.HasPrefix(lines[0], "version: (devel) (no module version: go run, go test") {
		t.Errorf("line 1: got %q, want (devel) explained", lines[0])
	}
}

func TestWriteVersion(t *testing.T) {
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	at := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		build metrics.Build
		want  string
	}{
		{
			name:  "release",
			build: metrics.Build{Version: "v1.2.3", Revision: "75928e8", Time: at, GoVersion: "go1.26.0"},
			want: "version: v1.2.3\n" +
				"commit:  75928e8\n" +
				"time:    2026-12-01T23:00:00Z\n" +
				"go:      go1.26.0" + platform,
		},
		{
			name:  "modified tree",
			build: metrics.Build{Version: "v0.0.0-20261201230000-75928e8+dirty", Revision: "75928e8", Time: at, Modified: true, GoVersion: "go1.26.0"},
			want: "version: v0.0.0-20261201230000-75928e8+dirty\n" +
				"commit:  75928e8+dirty\n" +
				"time:    2026-12-01T23:00:00Z\n" +
				"go:      go1.26.0" + platform,
		},
		{
			name:  "go run",
			build: metrics.Build{Version: "(devel)", GoVersion: "go1.26.0"},
			want: "version: (devel) (no module version: go run, go test, -buildvcs=false or a build outside a VCS checkout)\n" +
				"commit:  not recorded (go install of a module version, go run, go test and -buildvcs=false leave it out)\n" +
				"time:    not recorded\n" +
				"go:      go1.26.0" + platform,
		},
		{
			name:  "no build information",
			build: metrics.Build{},
			want: "version: unknown (the binary carries no build information)\n" +
				"commit:  not recorded (go install of a module version, go run, go test and -buildvcs=false leave it out)\n" +
				"time:    not recorded\n" +
				"go:      " + runtime.Version() + platform,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			writeVersion(&b, tt.build)
			if got := b.String(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// buildInfoLabels are the labels /metrics must give bouncer_build_info.
func buildInfoLabels() []string {
	b := metrics.ReadBuild()
	return []string{"version=" + b.Version, "revision=" + b.RevisionLabel(), "goversion=" + runtime.Version()}
}

func TestServeExportsBuildInfo(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	if got := ts.metric(t, "bouncer_build_info", buildInfoLabels()...); got != 1 {
		t.Errorf("bouncer_build_info%v: got %v, want 1", buildInfoLabels(), got)
	}
}

func TestGatewayExportsBuildInfo(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"rules.yaml":   gatewayRules,
		"gateway.yaml": strings.NewReplacer("ROUTE", "app", "UPSTREAM", "http://127.0.0.1:1").Replace(gatewayFile),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var c serveConfig
	if err := gatewayFlags(&c, io.Discard).Parse([]string{"--config", filepath.Join(dir, "gateway.yaml"), "--watch=false"}); err != nil {
		t.Fatal(err)
	}
	opts, err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	s, err := startGateway(t.Context(), c, opts, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.shutdown()
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + s.addrs[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := sample(string(body), "bouncer_build_info", buildInfoLabels()...); got != 1 {
		t.Errorf("bouncer_build_info%v: got %v, want 1 in\n%s", buildInfoLabels(), got, body)
	}
}

// A version set by the release build (-ldflags -X main.version) wins over
// the module version, in `bouncer version` and in bouncer_build_info.
func TestReleaseVersion(t *testing.T) {
	old := version
	version = "v9.8.7-rc.1"
	t.Cleanup(func() { version = old })

	_, stdout, _ := runArgs(t, "version")
	if want := "version: v9.8.7-rc.1\n"; !strings.HasPrefix(stdout, want) {
		t.Errorf("bouncer version: got %q, want it to start with %q", stdout, want)
	}
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	labels := []string{"version=v9.8.7-rc.1", "revision=" + metrics.ReadBuild().RevisionLabel(), "goversion=" + runtime.Version()}
	if got := ts.metric(t, "bouncer_build_info", labels...); got != 1 {
		t.Errorf("bouncer_build_info%v: got %v, want 1", labels, got)
	}
}

func TestWithVersion(t *testing.T) {
	module := metrics.Build{Version: "v0.0.0-20261201230000-75928e8", Revision: "75928e8", GoVersion: "go1.26.0"}
	tests := []struct {
		name, set, want string
	}{
		{"unset: the module version", "", "v0.0.0-20261201230000-75928e8"},
		{"set: the release's", "v1.2.3", "v1.2.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withVersion(module, tt.set)
			if got.Version != tt.want {
				t.Errorf("Version: got %q, want %q", got.Version, tt.want)
			}
			if got.Revision != module.Revision || got.GoVersion != module.GoVersion {
				t.Errorf("got %+v, want only Version changed from %+v", got, module)
			}
		})
	}
}
