package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runMainEnv makes this test binary run as the bouncer command (TestMain),
// so that a test can start the real process, signals and all, without
// building it.
const runMainEnv = "BOUNCER_TEST_RUN_MAIN"

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startProcess runs `bouncer args...` as a child process and returns it
// with its output.
func startProcess(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, &out
}

func configVersion(admin string) string {
	resp, err := http.Get("http://" + admin + "/v1/config")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v struct{ Version string }
	json.NewDecoder(resp.Body).Decode(&v)
	return v.Version
}

// The process reloads on SIGHUP (here with the file watch off, so that
// only the signal can have done it: no watch starts, and the one reload
// comes after the signal), and drains and exits 0 on SIGTERM.
func TestProcessSignals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.yaml")
	writeConfig(t, dir, "app.yaml", appConfig)
	admin := freeAddr(t)
	cmd, out := startProcess(t, "serve", "--config", path, "--grpc-addr", freeAddr(t), "--http-addr", "",
		"--admin-addr", admin, "--watch=false")
	first := ""
	until(t, "the process to serve", func() bool { first = configVersion(admin); return first != "" })

	writeConfig(t, dir, "app.yaml", strings.Replace(appConfig, "requests_per_unit: 2", "requests_per_unit: 3", 1))
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	until(t, "SIGHUP to reload the config", func() bool { v := configVersion(admin); return v != "" && v != first })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, out)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20s after SIGTERM\n%s", out)
	}
	logs := out.String()
	for _, want := range []string{"SIGHUP: reloading the config", "config reloaded", "shutting down", "stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log does not say %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "watching the config") || strings.Count(logs, "config reloaded") != 1 ||
		strings.Index(logs, "config reloaded") < strings.Index(logs, "SIGHUP") {
		t.Errorf("log: want no watch and one reload, after SIGHUP:\n%s", logs)
	}
}
