package jsonapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/jsonapi"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

const (
	envoyConfig = `domain: edge
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: banned
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: canary
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
`
	nativeConfig = `domain: api
rules:
  - name: writes
    match: [{key: route}]
    limits: [{name: writes, rate: 1, period: 10s, algorithm: gcra}]
`
)

// engine serves both configs from a memory store, or from lim if not nil.
func engine(t *testing.T, lim bouncer.Limiter) *rules.Engine {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"edge.yaml": envoyConfig, "api.yaml": nativeConfig} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := rules.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if lim == nil {
		st := memstore.New(memstore.Options{})
		t.Cleanup(func() { st.Close() })
		lim = st
	}
	return rules.NewEngine(c, lim)
}

// answer is a recorded answer with its body decoded.
type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func serve(t *testing.T, h http.Handler, method, body string) answer {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, "/v1/check", strings.NewReader(body)))
	a := answer{status: w.Code, header: w.Header()}
	if ct := get(a.header, "Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", ct)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &a.body); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	return a
}

func check(domain, entries string) string {
	return fmt.Sprintf(`{"domain": %q, "descriptors": [{"entries": [%s]}]}`, domain, entries)
}

// get returns a header's value whatever the case of its name, as an HTTP
// client reads it.
func get(h http.Header, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// status0 returns the answer's first descriptor status.
func (a answer) status0(t *testing.T) map[string]any {
	t.Helper()
	sts, _ := a.body["statuses"].([]any)
	if len(sts) == 0 {
		t.Fatalf("got no statuses in %v", a.body)
	}
	return sts[0].(map[string]any)
}

func TestCheckAllowThenDeny(t *testing.T) {
	h := &jsonapi.Handler{Engine: engine(t, nil), Headers: header.All}
	body := check("edge", `{"key": "user", "value": "a"}`) + "\n" // as json.Encoder writes it

	first := serve(t, h, "POST", body)
	if first.status != http.StatusOK || first.body["overall_code"] != "OK" {
		t.Fatalf("first: got %d %v, want 200 OK", first.status, first.body)
	}
	st := first.status0(t)
	if st["code"] != "OK" || st["limit_remaining"] != 1.0 {
		t.Errorf("first status: got %v, want OK with 1 remaining", st)
	}
	wantLimit := map[string]any{"requests_per_unit": 2.0, "unit": "HOUR", "window_seconds": 3600.0}
	if got, _ := st["current_limit"].(map[string]any); fmt.Sprint(got) != fmt.Sprint(wantLimit) {
		t.Errorf("current_limit: got %v, want %v", got, wantLimit)
	}
	if d, _ := st["duration_until_reset_seconds"].(float64); d <= 0 || d > 3600 {
		t.Errorf("duration_until_reset_seconds: got %v, want within (0, 3600]", st["duration_until_reset_seconds"])
	}
	for name, want := range map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "RateLimit-Policy": `"per_hour";q=2;w=3600`} {
		if got := get(first.header, name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if _, ok := first.body["error"]; ok {
		t.Errorf("an allowed answer has an error: %v", first.body)
	}

	serve(t, h, "POST", body)
	denied := serve(t, h, "POST", body)
	if denied.status != http.StatusTooManyRequests || denied.body["overall_code"] != "OVER_LIMIT" || denied.body["error"] != "rate_limited" {
		t.Fatalf("third: got %d %v, want 429, OVER_LIMIT and rate_limited", denied.status, denied.body)
	}
	retry, _ := denied.body["retry_after"].(float64)
	if retry < 1 || retry > 3600 {
		t.Errorf("retry_after: got %v, want 1 to 3600", denied.body["retry_after"])
	}
	if got := get(denied.header, "Retry-After"); got != fmt.Sprint(retry) {
		t.Errorf("Retry-After: got %q, want %v", got, retry)
	}
}

func TestCheckDenials(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantRetry string // retry_after and Retry-After; "" for none
	}{
		{"a GCRA interval", check("api", `{"key": "route", "value": "/a"}`), "10"},
		{"never", check("edge", `{"key": "banned", "value": "1"}`), ""},
		{"more hits than the limit", `{"domain": "edge", "hits_addend": 3, "descriptors": [{"entries": [{"key": "user", "value": "z"}]}]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &jsonapi.Handler{Engine: engine(t, nil), Headers: header.All}
			a := serve(t, h, "POST", tt.body)
			if a.status == http.StatusOK {
				a = serve(t, h, "POST", tt.body)
			}
			if a.status != http.StatusTooManyRequests || a.body["error"] != "rate_limited" {
				t.Fatalf("got %d %v, want 429 rate_limited", a.status, a.body)
			}
			got := ""
			if r, ok := a.body["retry_after"]; ok {
				got = fmt.Sprint(r)
			}
			if got != tt.wantRetry {
				t.Errorf("retry_after: got %q, want %q", got, tt.wantRetry)
			}
			if got := get(a.header, "Retry-After"); got != tt.wantRetry {
				t.Errorf("Retry-After: got %q, want %q", got, tt.wantRetry)
			}
		})
	}
}

// TestCheckDeniedAccept checks the body of a denial by the client's
// Accept: the answer with its statuses, or problem details, which carry
// the same message and retry_after and the same headers.
func TestCheckDeniedAccept(t *testing.T) {
	tests := []struct {
		accept string
		ct     string
	}{
		{"", "application/json"},
		{"*/*", "application/json"},
		{"application/problem+json;q=0.5, application/json", "application/json"},
		{"application/problem+json", "application/problem+json"},
		{"application/json;q=0.5, application/problem+json", "application/problem+json"},
	}
	for _, tt := range tests {
		t.Run(tt.accept, func(t *testing.T) {
			h := &jsonapi.Handler{Engine: engine(t, nil), Headers: header.All}
			body := check("api", `{"key": "route", "value": "/a"}`)
			var w *httptest.ResponseRecorder
			for range 2 {
				r := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body))
				if tt.accept != "" {
					r.Header.Set("Accept", tt.accept)
				}
				w = httptest.NewRecorder()
				h.ServeHTTP(w, r)
			}
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("got %d %s, want 429", w.Code, w.Body)
			}
			if got := w.Header().Get("Content-Type"); got != tt.ct {
				t.Errorf("Content-Type: got %q, want %q", got, tt.ct)
			}
			for name, want := range map[string]string{"Retry-After": "10", "RateLimit-Policy": `"writes";q=1;w=10`, "X-RateLimit-Remaining": "0"} {
				if got := w.Header().Get(name); got != want {
					t.Errorf("%s: got %q, want %q", name, got, want)
				}
			}
			var got map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			message, want := got["message"], map[string]any{"error": "rate_limited", "overall_code": "OVER_LIMIT"}
			if tt.ct == header.Problem {
				message, want = got["detail"], map[string]any{"type": header.QuotaExceeded, "status": 429.0, "violated-policies": []any{"writes"}}
			}
			if message != `over the limit "writes"` || got["retry_after"] != 10.0 {
				t.Errorf("body %v: want the message naming writes and retry_after 10", got)
			}
			for k, v := range want {
				if fmt.Sprint(got[k]) != fmt.Sprint(v) {
					t.Errorf("%s: got %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func TestCheckShadowAndHeadersOff(t *testing.T) {
	h := &jsonapi.Handler{Engine: engine(t, nil), Headers: header.Off}
	body := check("edge", `{"key": "canary", "value": "1"}`)
	serve(t, h, "POST", body)
	a := serve(t, h, "POST", body)
	if a.status != http.StatusOK || a.status0(t)["shadowed"] != true {
		t.Errorf("shadow rule over its limit: got %d %v, want 200 and shadowed", a.status, a.body)
	}
	for name := range a.header {
		if strings.Contains(strings.ToLower(name), "ratelimit") {
			t.Errorf("headers off: got %s", name)
		}
	}
}

func TestCheckBadInput(t *testing.T) {
	const entry = `{"entries": [{"key": "user", "value": "b"}]}`
	tests := []struct {
		name       string
		method     string
		body       string
		maxBody    int64
		wantStatus int
		wantError  string
	}{
		{"malformed JSON", "POST", `{"domain":`, 0, 400, "invalid_request"},
		{"empty body", "POST", ``, 0, 400, "invalid_request"},
		{"null", "POST", `null`, 0, 400, "invalid_request"},
		{"two objects", "POST", check("edge", `{"key": "user", "value": "b"}`) + `{}`, 0, 400, "invalid_request"},
		{"a stray bracket after the object", "POST", check("edge", `{"key": "user", "value": "b"}`) + `]`, 0, 400, "invalid_request"},
		{"a stray brace after the object", "POST", check("edge", `{"key": "user", "value": "b"}`) + "\n}", 0, 400, "invalid_request"},
		{"a word after the object", "POST", check("edge", `{"key": "user", "value": "b"}`) + ` true`, 0, 400, "invalid_request"},
		{"unknown field", "POST", `{"domain": "edge", "descriptors": [` + entry + `], "costs": 1}`, 0, 400, "invalid_request"},
		{"unknown entry field", "POST", `{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "val": "b"}]}]}`, 0, 400, "invalid_request"},
		{"negative hits", "POST", `{"domain": "edge", "descriptors": [` + entry + `], "hits_addend": -1}`, 0, 400, "invalid_request"},
		{"fractional hits", "POST", `{"domain": "edge", "descriptors": [` + entry + `], "hits_addend": 1.5}`, 0, 400, "invalid_request"},
		{"hits above the bound", "POST", `{"domain": "edge", "descriptors": [` + entry + `], "hits_addend": 1099511627777}`, 0, 400, "invalid_request"},
		{"no domain", "POST", `{"descriptors": [` + entry + `]}`, 0, 400, "invalid_request"},
		{"no descriptors", "POST", `{"domain": "edge"}`, 0, 400, "invalid_request"},
		{"unknown unit", "POST", `{"domain": "edge", "descriptors": [{"entries": [], "limit": {"requests_per_unit": 1, "unit": "fortnight"}}]}`, 0, 400, "invalid_request"},
		{"override beyond any store", "POST", `{"domain": "edge", "descriptors": [{"entries": [], "limit": {"requests_per_unit": 1000000000, "unit": "second"}}]}`, 0, 400, "invalid_request"},
		{"invalid UTF-8 in a value", "POST", check("edge", "{\"key\": \"user\", \"value\": \"q\xffq\"}"), 0, 400, "invalid_request"},
		{"invalid UTF-8 in a key", "POST", check("edge", "{\"key\": \"us\xfeer\", \"value\": \"q\"}"), 0, 400, "invalid_request"},
		{"a lone high surrogate", "POST", check("edge", `{"key": "user", "value": "q\ud83dq"}`), 0, 400, "invalid_request"},
		{"a lone high surrogate at the end", "POST", check("edge", `{"key": "user", "value": "q\ud83d"}`), 0, 400, "invalid_request"},
		{"a lone low surrogate", "POST", check("edge", `{"key": "user", "value": "q\ude00q"}`), 0, 400, "invalid_request"},
		{"a high surrogate before another escape", "POST", check("edge", `{"key": "user", "value": "\ud83d\n"}`), 0, 400, "invalid_request"},
		{"GET", "GET", ``, 0, 405, "method_not_allowed"},
		{"DELETE", "DELETE", ``, 0, 405, "method_not_allowed"},
		{"body over MaxBody", "POST", check("edge", `{"key": "user", "value": "b"}`), 20, 413, "body_too_large"},
		{"body over the default bound", "POST", `{"domain": "` + strings.Repeat("d", jsonapi.DefaultMaxBody) + `"}`, 0, 413, "body_too_large"},
	}
	e := engine(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &jsonapi.Handler{Engine: e, Headers: header.All, MaxBody: tt.maxBody}
			a := serve(t, h, tt.method, tt.body)
			if a.status != tt.wantStatus || a.body["error"] != tt.wantError {
				t.Errorf("got %d %v, want %d %s", a.status, a.body["error"], tt.wantStatus, tt.wantError)
			}
			if msg, _ := a.body["message"].(string); msg == "" {
				t.Errorf("message: got %v, want a sentence", a.body["message"])
			}
			if tt.wantStatus == 405 && get(a.header, "Allow") != "POST" {
				t.Errorf("Allow: got %q, want POST", a.header.Get("Allow"))
			}
		})
	}
}

// Values that encoding/json would turn into U+FFFD are refused above;
// every valid one is a key of its own, U+FFFD and escaped pairs included.
func TestCheckDistinctUnicodeValues(t *testing.T) {
	h := &jsonapi.Handler{Engine: engine(t, nil), Headers: header.All}
	values := []string{`q\ufffdq`, "q\uFFFDq-literal", `q\ud83d\ude00q`, "q\xf0\x9f\x98\x80q-raw", `q\"q`}
	for _, v := range values {
		for i := range 3 {
			a := serve(t, h, "POST", check("edge", `{"key": "user", "value": "`+v+`"}`))
			want := http.StatusOK
			if i == 2 {
				want = http.StatusTooManyRequests // 2 an hour
			}
			if a.status != want {
				t.Fatalf("value %q, check %d: got %d %v, want %d: each value counts on its own", v, i+1, a.status, a.body, want)
			}
		}
	}
}

// POST /v1/check takes JSON: a body declared as another type is 415.
func TestCheckContentType(t *testing.T) {
	h := &jsonapi.Handler{Engine: engine(t, nil), Headers: header.All}
	tests := []struct {
		ct   string
		want int
	}{
		{"", http.StatusOK},
		{"application/json", http.StatusOK},
		{"application/json; charset=utf-8", http.StatusOK},
		{"Application/JSON", http.StatusOK},
		{"application/vnd.api+json", http.StatusOK},
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"text/plain", http.StatusUnsupportedMediaType},
		{"multipart/form-data; boundary=x", http.StatusUnsupportedMediaType},
		{"application/json;;", http.StatusUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.ct, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/check", strings.NewReader(check("edge", `{"key": "user", "value": "ct"}`)))
			if tt.ct != "" {
				r.Header.Set("Content-Type", tt.ct)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want && !(tt.want == http.StatusOK && w.Code == http.StatusTooManyRequests) {
				t.Fatalf("Content-Type %q: got %d %s, want %d", tt.ct, w.Code, w.Body, tt.want)
			}
			if tt.want == http.StatusUnsupportedMediaType && !strings.Contains(w.Body.String(), `"error":"unsupported_media_type"`) {
				t.Fatalf("Content-Type %q: body %s, want a JSON error", tt.ct, w.Body)
			}
		})
	}
}

// An answer with a descriptor decided without the shared store says so
// in a header, besides its status's "degraded".
func TestCheckDegradedHeader(t *testing.T) {
	for _, degraded := range []bool{false, true} {
		h := &jsonapi.Handler{Engine: engine(t, marking{memstore.New(memstore.Options{}), degraded}), Headers: header.All}
		a := serve(t, h, "POST", check("edge", `{"key": "user", "value": "d"}`))
		if got, want := get(a.header, header.Degraded), map[bool]string{true: "true"}[degraded]; got != want {
			t.Errorf("degraded %v: %s header %q, want %q", degraded, header.Degraded, got, want)
		}
		if got := a.status0(t)["degraded"] == true; got != degraded {
			t.Errorf("degraded %v: status %v", degraded, a.status0(t))
		}
	}
}

// marking decides with its store and marks decisions Degraded as told.
type marking struct {
	*memstore.Store
	degraded bool
}

func (m marking) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	d, err := m.Store.Check(ctx, r)
	d.Degraded = m.degraded
	return d, err
}

// Every error of Decide maps to one HTTP status.
func TestCheckErrors(t *testing.T) {
	tests := []struct {
		name       string
		storeErr   error
		reject     bool
		domain     string
		wantStatus int
		wantError  string
	}{
		{"store failure", errors.New("connection refused"), false, "edge", 503, "store_unavailable"},
		{"store deadline", fmt.Errorf("redisstore: %w", context.DeadlineExceeded), false, "edge", 504, "deadline_exceeded"},
		{"canceled", context.Canceled, false, "edge", 499, "canceled"},
		{"unknown domain rejected", nil, true, "nowhere", 404, "unknown_domain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := engine(t, failing{tt.storeErr})
			e.RejectUnknownDomains = tt.reject
			a := serve(t, &jsonapi.Handler{Engine: e}, "POST", check(tt.domain, `{"key": "user", "value": "e"}`))
			if a.status != tt.wantStatus || a.body["error"] != tt.wantError {
				t.Errorf("got %d %v, want %d %s", a.status, a.body, tt.wantStatus, tt.wantError)
			}
		})
	}
}

type failing struct{ err error }

func (f failing) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{}, f.err
}

func (f failing) Refund(context.Context, bouncer.Request) error { return f.err }
