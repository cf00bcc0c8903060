package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/bouncerhq/bouncer/internal/redistest"
)

// adminCall sends method to an admin listener's path with the token, if
// any, and returns the status and the decoded body.
func adminCall(t *testing.T, method, admin, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// Three bouncer serve processes on one Redis: a key's runtime limits,
// set through one process's admin API with its token, apply on every
// process from its next check, carry over what the key used, stay within
// the rule's bounds, are refused without the token, are logged with who
// and what (and counted), and, deleted, give the key its rule's limit
// back.
func TestRuntimeLimitsThreeProcesses(t *testing.T) {
	addr := redistest.Addr(t)
	domain := fmt.Sprintf("limits-%d-%d", os.Getpid(), time.Now().UnixNano()) // Redis outlives the test
	dir := t.TempDir()
	cfg := fmt.Sprintf("domain: %s\nrules:\n  - name: per_tenant\n    match: [{key: tenant}]\n    limits: [{name: day, rate: 5, period: 1d, algorithm: fixed_window}]\n    overrides:\n      day: {min: 1, max: 20}\n", domain)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "s3cret-admin-token-for-the-test"
	tokenFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var clients []pb.RateLimitServiceClient
	var admins []string
	var procs []*serveProc
	for range 3 {
		grpcAddr, admin := freeAddr(t), freeAddr(t)
		procs = append(procs, startServe(t, "--config", dir, "--store", "redis://"+addr, "--grpc-addr", grpcAddr, "--http-addr", "",
			"--admin-addr", admin, "--admin-token-file", tokenFile))
		clients, admins = append(clients, rlsClient(t, grpcAddr)), append(admins, admin)
	}
	remaining := func(i int) (pb.RateLimitResponse_Code, uint32) {
		t.Helper()
		resp, _, err := decide(t.Context(), clients[i], domain, "tenant=acme")
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode, resp.Statuses[0].LimitRemaining
	}
	for i := range 4 {
		if code, left := remaining(i % 3); code != pb.RateLimitResponse_OK || left != uint32(4-i) {
			t.Fatalf("check %d under the rule's 5 a day: %v, %d left", i, code, left)
		}
	}
	key := "/v1/limits?domain=" + domain + "&entry=tenant=acme"
	if status, body := adminCall(t, http.MethodPut, admins[0], key, "", `{"rates":{"day":10},"by":"ops@example.com"}`); status != http.StatusUnauthorized {
		t.Fatalf("a change without the token: %d %v, want 401", status, body)
	}
	if status, body := adminCall(t, http.MethodPut, admins[0], key, token, `{"rates":{"day":21},"by":"ops@example.com"}`); status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["message"]), "outside the rule's bounds, 1 to 20") {
		t.Fatalf("a rate over the rule's bound: %d %v, want 400 naming the bounds", status, body)
	}
	if status, body := adminCall(t, http.MethodPut, admins[0], key, token, `{"rates":{"day":10},"by":"ops@example.com"}`); status != http.StatusOK {
		t.Fatalf("raising the day to 10: %d %v", status, body)
	}
	// Every process, on its next check: 10 a day, of which 4 were used.
	for i := range 3 {
		if code, left := remaining(i); code != pb.RateLimitResponse_OK || left != uint32(5-i) {
			t.Fatalf("process %d after the raise: %v, %d left; want %d", i, code, left, 5-i)
		}
	}
	status, body := adminCall(t, http.MethodGet, admins[2], key, "", "")
	custom, _ := body["custom"].(map[string]any)
	if status != http.StatusOK || custom == nil || custom["by"] != "ops@example.com" || fmt.Sprint(custom["rates"]) != "map[day:10]" {
		t.Fatalf("another process shows the key's limits: %d %v", status, body)
	}
	if status, body := adminCall(t, http.MethodDelete, admins[1], key+"&by=ops@example.com", token, ""); status != http.StatusOK {
		t.Fatalf("deleting: %d %v", status, body)
	}
	// Back to 5 a day, with the 7 used carried over: nothing left.
	for i := range 3 {
		if code, _ := remaining(i); code != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("process %d after the delete: %v, want over the rule's 5", i, code)
		}
	}
	procs[0].waitOutput(t, "runtime limits set")
	for _, want := range []string{`by=ops@example.com`, `key=` + domain, `old=none`, `new="day=10"`} {
		if !strings.Contains(procs[0].output(), want) {
			t.Errorf("the set's audit line lacks %q:\n%s", want, grepLines(procs[0].output(), "runtime limits"))
		}
	}
	procs[1].waitOutput(t, "runtime limits delete")
	if !strings.Contains(grepLines(procs[1].output(), "runtime limits delete"), `old="day=10" new=none`) {
		t.Errorf("the delete's audit line: %s", grepLines(procs[1].output(), "runtime limits"))
	}
	if n := sumMetric(t, admins[0], "bouncer_runtime_limits_changes_total"); n != 1 {
		t.Errorf("process 0 counted %v changes, want 1", n)
	}
}

// grepLines returns the lines of s that hold sub.
func grepLines(s, sub string) string {
	var b bytes.Buffer
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			b.WriteString(line)
		}
	}
	return b.String()
}
