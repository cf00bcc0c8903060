package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/memstore"
)

const stateConfig = "domain: keep\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 10}\n"

// spend checks hits for user u on the JSON API and returns what is left.
func spend(t *testing.T, httpAddr string, hits int) int {
	t.Helper()
	body := `{"domain": "keep", "hits_addend": ` + strconv.Itoa(hits) + `, "descriptors": [{"entries": [{"key": "user", "value": "u"}]}]}`
	resp, err := http.Post("http://"+httpAddr+"/v1/check", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Statuses []struct {
			LimitRemaining int `json:"limit_remaining"`
		} `json:"statuses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Statuses) != 1 {
		t.Fatalf("check: %v %+v", err, got)
	}
	return got.Statuses[0].LimitRemaining
}

// stopServe sends SIGTERM and waits for a clean exit.
func stopServe(t *testing.T, p *serveProc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20s after SIGTERM:\n%s", p.output())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, p.output())
	}
}

// A key spends part of a day's window; the process is stopped (SIGTERM)
// and started again on the same --state-file: the key has what it had
// left, not a fresh window.
func TestServeStateFileKeepsBudgetsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "keep.yaml", stateConfig)
	state := filepath.Join(dir, "bouncer.state")
	start := func() (*serveProc, string, string) {
		httpAddr, admin := freeAddr(t), freeAddr(t)
		p := startServe(t, "--config", filepath.Join(dir, "keep.yaml"), "--grpc-addr", freeAddr(t),
			"--http-addr", httpAddr, "--admin-addr", admin, "--state-file", state, "--state-save-interval", "1h")
		return p, httpAddr, admin
	}
	p, httpAddr, admin := start()
	if left := spend(t, httpAddr, 4); left != 6 {
		t.Fatalf("first run: %d left, want 6", left)
	}
	if n := sumMetric(t, admin, "bouncer_state_saves_total"); n != 0 {
		t.Fatalf("bouncer_state_saves_total = %v before any save, want 0", n)
	}
	stopServe(t, p)
	if !strings.Contains(p.output(), "saved state") {
		t.Errorf("no log of the save at shutdown:\n%s", p.output())
	}
	p, httpAddr, admin = start()
	if left := spend(t, httpAddr, 1); left != 5 {
		t.Fatalf("after the restart: %d left, want 5 (6 kept, 1 spent)\n%s", left, p.output())
	}
	if !strings.Contains(p.output(), "restored state") || !strings.Contains(p.output(), "states=1") {
		t.Errorf("no log of the restore of one state:\n%s", p.output())
	}
	stopServe(t, p)
}

// A damaged state file stops the start with an error naming the file;
// --state-file with Redis is refused.
func TestServeStateFileRefused(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "keep.yaml", stateConfig)
	state := filepath.Join(dir, "bouncer.state")
	if err := os.WriteFile(state, []byte("BNCRMEM\x00\x01\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"damaged file", nil, "--state-file: memstore: load " + state + ": truncated: 12 bytes"},
		{"with Redis", []string{"--store", "redis://127.0.0.1:1"}, "--state-file: only with --store memory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--config", filepath.Join(dir, "keep.yaml"), "--grpc-addr", freeAddr(t),
				"--http-addr", "", "--admin-addr", "", "--state-file", state}, c.args...)
			cmd, out := startProcess(t, args...)
			err := cmd.Wait()
			if err == nil || !strings.Contains(out.String(), c.want) {
				t.Fatalf("exit %v, want a failure saying %q:\n%s", err, c.want, out)
			}
		})
	}
}

// A save that fails is logged and counted as an error, and the store's
// last save at Close reports it.
func TestStateFileSaveFailure(t *testing.T) {
	var logs strings.Builder
	log := newLogger(&logs, "text", 0)
	reg := prometheus.NewRegistry()
	ms := memstore.New(memstore.Options{Persistent: true})
	path := filepath.Join(t.TempDir(), "missing-dir", "bouncer.state")
	sf, err := openStateFile(ms, path, time.Hour, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sf.Close(); err == nil {
		t.Fatal("Close saved into a directory that does not exist")
	}
	if got := savesTotal(t, reg, "error"); got != 1 {
		t.Errorf("bouncer_state_saves_total{result=error} = %v, want 1", got)
	}
	if got := savesTotal(t, reg, "ok"); got != 0 {
		t.Errorf("bouncer_state_saves_total{result=ok} = %v, want 0", got)
	}
	for _, want := range []string{"no state file yet", "saving the state failed", path} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log does not say %q:\n%s", want, logs.String())
		}
	}
}

// savesTotal returns bouncer_state_saves_total{result} as reg gathers it.
func savesTotal(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "bouncer_state_saves_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no bouncer_state_saves_total{result=%q}", result)
	return 0
}
