package jsonapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/jsonapi"
)

func TestReport(t *testing.T) {
	h := &jsonapi.Handler{Engine: engine(t, nil)}
	report := h.Report()
	for _, tc := range []struct {
		name, body  string
		check       string // the same descriptor, as a check of 1
		status      int
		overall     string
		remaining   float64
		thenChecked int // the status of a check of 1 after the report
	}{
		{
			name:   "charged and reported under envoyproxy/ratelimit's semantics",
			body:   `{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u1"}]}],"hits_addend":1}`,
			check:  `{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u1"}]}]}`,
			status: 200, overall: "OK", remaining: 1, thenChecked: 200,
		},
		{
			name:   "past the limit: nothing left, and the next check is refused",
			body:   `{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u2"}]}],"hits_addend":4}`,
			check:  `{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u2"}]}]}`,
			status: 200, overall: "OVER_LIMIT", remaining: 0, thenChecked: 429,
		},
		{
			name:   "a descriptor's own hits_addend, under Bouncer's semantics: a debt",
			body:   `{"domain":"api","descriptors":[{"entries":[{"key":"route","value":"/w"}],"hits_addend":3}]}`,
			check:  `{"domain":"api","descriptors":[{"entries":[{"key":"route","value":"/w"}]}]}`,
			status: 200, overall: "OVER_LIMIT", remaining: 0, thenChecked: 429,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := serve(t, report, http.MethodPost, tc.body)
			if a.status != tc.status || a.body["overall_code"] != tc.overall {
				t.Fatalf("report: %d %v, want %d %s", a.status, a.body, tc.status, tc.overall)
			}
			st := a.body["statuses"].([]any)[0].(map[string]any)
			if st["limit_remaining"] != tc.remaining {
				t.Errorf("limit_remaining %v, want %v", st["limit_remaining"], tc.remaining)
			}
			if c := serve(t, h, http.MethodPost, tc.check); c.status != tc.thenChecked {
				t.Errorf("a check after the report: %d, want %d", c.status, tc.thenChecked)
			}
		})
	}
}

func TestReportErrors(t *testing.T) {
	report := (&jsonapi.Handler{Engine: engine(t, nil)}).Report()
	for _, tc := range []struct {
		name, method, body string
		status             int
		code               string
	}{
		{"no descriptors", http.MethodPost, `{"domain":"edge","descriptors":[]}`, 400, "invalid_request"},
		{"not JSON", http.MethodPost, `{"domain":`, 400, "invalid_request"},
		{"a negative hits_addend", http.MethodPost, `{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u"}]}],"hits_addend":-1}`, 400, "invalid_request"},
		{"GET", http.MethodGet, ``, 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := serve(t, report, tc.method, tc.body)
			if a.status != tc.status || a.body["error"] != tc.code {
				t.Errorf("%d %v, want %d %s", a.status, a.body, tc.status, tc.code)
			}
		})
	}
	// A store that cannot charge says so.
	noCharge := (&jsonapi.Handler{Engine: engine(t, checkOnly{engine(t, nil).Limiter})}).Report()
	a := serve(t, noCharge, http.MethodPost, `{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u"}]}]}`)
	if a.status != http.StatusNotImplemented || a.body["error"] != "not_supported" {
		t.Errorf("a store without Charge: %d %v, want 501 not_supported", a.status, a.body)
	}
}

// checkOnly hides its limiter's Charge.
type checkOnly struct{ l bouncer.Limiter }

func (c checkOnly) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	return c.l.Check(ctx, r)
}
func (c checkOnly) Refund(ctx context.Context, r bouncer.Request) error { return c.l.Refund(ctx, r) }

// TestReportBounded asserts that a report of more hits than one report
// may charge its rule (the hostile 2^40 that put a key 52 days into
// debt) is a 400 naming the bound, and charges nothing.
func TestReportBounded(t *testing.T) {
	h := &jsonapi.Handler{Engine: engine(t, nil)}
	for _, hits := range []string{"1099511627776", "5"} {
		a := serve(t, h.Report(), http.MethodPost, `{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u9"}]}],"hits_addend":`+hits+`}`)
		msg, _ := a.body["message"].(string)
		if a.status != http.StatusBadRequest || a.body["error"] != "invalid_request" || !strings.Contains(msg, "above 4, the most one report may charge") {
			t.Errorf("a report of %s hits: %d %v, want 400 invalid_request naming the bound 4", hits, a.status, a.body)
		}
	}
	if c := serve(t, h, http.MethodPost, `{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u9"}]}]}`); c.status != http.StatusOK {
		t.Errorf("a check after the refused reports: %d, want 200 (nothing charged)", c.status)
	}
}
