package main

import (
	"io"
	"net/http"
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
