package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// startExample serves one of the configs in examples/serve as it is.
func startExample(t *testing.T, path string) *testService {
	t.Helper()
	files := map[string]string{}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		matches, _ := filepath.Glob(filepath.Join(path, "*.yaml"))
		for _, m := range matches {
			files[filepath.Base(m)] = readFileT(t, m)
		}
	} else {
		files[filepath.Base(path)] = readFileT(t, path)
	}
	if len(files) == 0 {
		t.Fatalf("no config in %s", path)
	}
	return startTest(t, files)
}

func readFileT(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README's tour: with examples/serve/bouncer.yaml, alice's fourth
// request in a row is denied, with Retry-After.
func TestExampleBouncerConfig(t *testing.T) {
	ts := startExample(t, "../../examples/serve/bouncer.yaml")
	body := `{"domain":"api","descriptors":[{"entries":[{"key":"user_id","value":"alice"}]}]}`
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		status, h, out := ts.postCheck(t, http.MethodPost, body)
		if status != want {
			t.Fatalf("request %d: got %d %v, want %d", i+1, status, out, want)
		}
		if want == http.StatusTooManyRequests && (h.Get("Retry-After") == "" || out["overall_code"] != "OVER_LIMIT") {
			t.Errorf("the denial: got Retry-After %q and %v, want both", h.Get("Retry-After"), out)
		}
	}
	// The pro plan's limits are higher.
	pro := `{"domain":"api","descriptors":[{"entries":[{"key":"user_id","value":"bob"},{"key":"plan","value":"pro"}]}]}`
	for i := range 10 {
		if status, _, out := ts.postCheck(t, http.MethodPost, pro); status != http.StatusOK {
			t.Fatalf("pro request %d: got %d %v, want 200", i+1, status, out)
		}
	}
}

// examples/serve/envoy, in envoyproxy/ratelimit's format: the partner's
// key replaces the per-IP limit; health checks are unlimited.
func TestExampleEnvoyConfig(t *testing.T) {
	ts := startExample(t, "../../examples/serve/envoy")
	runSteps(t, ts, []step{
		{request("edge_proxy", desc("remote_address=10.1.2.3")), "OK: OK/59"},
		{request("edge_proxy", desc("remote_address=10.1.2.3"), desc("api_key=partner-123")), "OK: OK OK/99"},
		{request("edge_proxy", desc("path=/healthz")), "OK: OK/unlimited"},
		{request("edge_proxy", desc("api_key=k1", "path=/upload/a")), "OK: OK/9"},
	})
}
