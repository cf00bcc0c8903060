package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// POST /v1/report charges without deciding: past the limit, so that the
// next check is refused.
func TestServeJSONReport(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	post := func(path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+ts.httpAddr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.web.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const report = `{"domain": "app", "descriptors": [{"entries": [{"key": "user", "value": "r"}]}], "hits_addend": 3}`
	if status, body := post("/v1/report", report); status != http.StatusOK || !strings.Contains(body, `"overall_code":"OVER_LIMIT"`) {
		t.Fatalf("POST /v1/report: %d %s, want 200 and OVER_LIMIT (nothing left)", status, body)
	}
	const check = `{"domain": "app", "descriptors": [{"entries": [{"key": "user", "value": "r"}]}]}`
	if status, body := post("/v1/check", check); status != http.StatusTooManyRequests {
		t.Errorf("POST /v1/check after the report: %d %s, want 429", status, body)
	}
	// One call cannot put a key into weeks of debt: above the rule's
	// report bound (here twice its 2 a minute) is a 400 naming it.
	const hostile = `{"domain": "app", "descriptors": [{"entries": [{"key": "user", "value": "h"}]}], "hits_addend": 1099511627776}`
	if status, body := post("/v1/report", hostile); status != http.StatusBadRequest || !strings.Contains(body, "above 4, the most one report may charge") {
		t.Errorf("POST /v1/report of 2^40 hits: %d %s, want 400 naming the bound", status, body)
	}
	if status, body := post("/v1/report", `{"domain": "app"}`); status != http.StatusBadRequest {
		t.Errorf("POST /v1/report without descriptors: %d %s, want 400", status, body)
	}
}

// TestServeTokens asserts the optional credentials: with --api-token-file
// the JSON API answers 401 without the token, with it as before; with
// BOUNCER_ADMIN_TOKEN the admin API's reset needs the token, and its
// reads do not.
func TestServeTokens(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-token")
	if err := os.WriteFile(file, []byte("api-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BOUNCER_ADMIN_TOKEN", "admin-s3cret")
	ts := startTest(t, map[string]string{"app.yaml": appConfig}, func(c *serveConfig) { c.apiTokenFile = file })
	do := func(method, url, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := ts.web.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	api, adm := "http://"+ts.httpAddr, "http://"+ts.adminAddr
	const check = `{"domain": "app", "descriptors": [{"entries": [{"key": "user", "value": "t"}]}]}`
	const report = `{"domain": "app", "descriptors": [{"entries": [{"key": "user", "value": "t"}]}], "hits_addend": 2}`
	cases := []struct {
		name, method, url, token, body string
		want                           int
	}{
		{"a check without the token", http.MethodPost, api + "/v1/check", "", check, http.StatusUnauthorized},
		{"a report with the wrong token", http.MethodPost, api + "/v1/report", "admin-s3cret", report, http.StatusUnauthorized},
		{"a report with the token", http.MethodPost, api + "/v1/report", "api-s3cret", report, http.StatusOK},
		{"a check with the token, refused by the report's charge", http.MethodPost, api + "/v1/check", "api-s3cret", check, http.StatusTooManyRequests},
		{"a reset without the token", http.MethodPost, adm + "/v1/keys/reset?domain=app&entry=user=t", "", "", http.StatusUnauthorized},
		{"a reset with the API's token", http.MethodPost, adm + "/v1/keys/reset?domain=app&entry=user=t", "api-s3cret", "", http.StatusUnauthorized},
		{"a read of the admin API", http.MethodGet, adm + "/v1/rules", "", "", http.StatusOK},
		{"a reset with the token", http.MethodPost, adm + "/v1/keys/reset?domain=app&entry=user=t", "admin-s3cret", "", http.StatusOK},
		{"a check after the reset", http.MethodPost, api + "/v1/check", "api-s3cret", check, http.StatusOK},
	}
	for _, c := range cases {
		if got, body := do(c.method, c.url, c.token, c.body); got != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, got, body, c.want)
		}
	}
}

// TestServeTokenErrors asserts that a token that cannot be read, or one
// given twice, stops the start with the flag's name.
func TestServeTokenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		set  func(*serveConfig)
		env  string
		want string
	}{
		{"a missing file", func(c *serveConfig) { c.apiTokenFile = filepath.Join(dir, "nope") }, "", "--api-token-file: open "},
		{"an empty file", func(c *serveConfig) { c.adminTokenFile = empty }, "", "--admin-token-file: the token is empty"},
		{"a file and the variable", func(c *serveConfig) { c.adminTokenFile = empty }, "x", "--admin-token-file: both a token file and BOUNCER_ADMIN_TOKEN are set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("BOUNCER_ADMIN_TOKEN", c.env)
			}
			sc := defaultServeConfig(t)
			sc.config = dir
			c.set(&sc)
			if _, err := sc.validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("validate: %v, want %q", err, c.want)
			}
		})
	}
}
