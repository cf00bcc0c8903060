package header

import (
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestPrefersProblem(t *testing.T) {
	tests := []struct {
		name   string
		accept []string
		want   bool
	}{
		{"no Accept", nil, false},
		{"empty", []string{""}, false},
		{"anything", []string{"*/*"}, false},
		{"an old client's anything", []string{"text/html, *; q=.2, */*; q=.2"}, false},
		{"JSON", []string{"application/json"}, false},
		{"problem", []string{"application/problem+json"}, true},
		{"problem, anything else less", []string{"application/problem+json, */*;q=0.1"}, true},
		{"JSON less than problem", []string{"application/json;q=0.5, application/problem+json"}, true},
		{"problem less than JSON", []string{"application/problem+json;q=0.5, application/json"}, false},
		{"a tie keeps JSON", []string{"application/problem+json, application/json"}, false},
		{"problem over application/*", []string{"application/*;q=0.2, application/problem+json;q=0.9"}, true},
		{"the most specific range wins", []string{"application/problem+json;q=0.1, application/*;q=1"}, false},
		{"JSON refused", []string{"application/json;q=0, */*;q=0.5"}, true},
		{"problem refused", []string{"application/problem+json;q=0"}, false},
		{"neither", []string{"text/html"}, false},
		{"several lines", []string{"application/json;q=0.1", "application/problem+json"}, true},
		{"upper case and spaces", []string{"Application/Problem+JSON ; Q=0.9 , application/json ; q=0.8"}, true},
		{"a malformed q is ignored", []string{"application/problem+json;q=1.5, application/json;q=0.5"}, false},
		{"a malformed range is ignored", []string{"application/problem+json, ;;, application/json;q=0.5"}, true},
		{"commas in quotes", []string{`application/json;q=0.5;x="a,application/problem+json", application/problem+json`}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PrefersProblem(tt.accept); got != tt.want {
				t.Errorf("PrefersProblem(%q): got %v, want %v", tt.accept, got, tt.want)
			}
		})
	}
}

// denied is the decision most tests deny with.
var denied = Values{Policy: "per_minute", Limit: 10, Window: time.Minute, Reset: 30 * time.Second, RetryAfter: 2500 * time.Millisecond}

func TestWriteDenied(t *testing.T) {
	tests := []struct {
		name    string
		accept  string
		v       Values
		message string
		ct      string
		want    any // *Denial or *ProblemDetails
	}{
		{"JSON by default", "", denied, `over "per_minute"`, JSON,
			&Denial{Error: "rate_limited", Message: `over "per_minute"`, RetryAfter: new(int64(3))}},
		{"JSON for */*", "*/*", denied, "slow down", JSON,
			&Denial{Error: "rate_limited", Message: "slow down", RetryAfter: new(int64(3))}},
		{"problem when preferred", "application/json;q=0.9, application/problem+json", denied, "slow down", Problem,
			&ProblemDetails{Type: QuotaExceeded, Title: QuotaExceededTitle, Status: 429, Detail: "slow down", ViolatedPolicies: []string{"per_minute"}, RetryAfter: new(int64(3))}},
		{"JSON when preferred", "application/json, application/problem+json;q=0.9", denied, "slow down", JSON,
			&Denial{Error: "rate_limited", Message: "slow down", RetryAfter: new(int64(3))}},
		{"never: no retry_after", "", Values{Policy: "p", Limit: 0, RetryAfter: math.MaxInt64}, "never", JSON,
			&Denial{Error: "rate_limited", Message: "never"}},
		{"never, problem", "application/problem+json", Values{Limit: 0, RetryAfter: math.MaxInt64}, "never", Problem,
			&ProblemDetails{Type: QuotaExceeded, Title: QuotaExceededTitle, Status: 429, Detail: "never", ViolatedPolicies: []string{"default"}}},
		{"no message", "", Values{Policy: "p", RetryAfter: time.Millisecond}, "", JSON,
			&Denial{Error: "rate_limited", Message: DefaultMessage, RetryAfter: new(int64(1))}},
		{"a message to escape", "application/problem+json", Values{Policy: "p"}, "\"</script>\n\x00é\\", Problem,
			&ProblemDetails{Type: QuotaExceeded, Title: QuotaExceededTitle, Status: 429, Detail: "\"</script>\n\x00é\\", ViolatedPolicies: []string{"p"}, RetryAfter: new(int64(1))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.accept != "" {
				r.Header.Set("Accept", tt.accept)
			}
			w := httptest.NewRecorder()
			WriteDenied(w, r, tt.v, All, tt.message)
			if w.Code != http.StatusTooManyRequests {
				t.Errorf("status: got %d, want 429", w.Code)
			}
			checkDenied(t, w.Header(), tt.v, tt.ct)
			got := reflect.New(reflect.TypeOf(tt.want).Elem()).Interface()
			dec := json.NewDecoder(w.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(got); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("body: got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// checkDenied checks the headers of a denial of v under All.
func checkDenied(t *testing.T, h http.Header, v Values, ct string) {
	t.Helper()
	if got := h.Get("Content-Type"); got != ct {
		t.Errorf("Content-Type: got %q, want %q", got, ct)
	}
	if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options: got %q, want nosniff", got)
	}
	v.Denied = true
	for _, f := range v.Append(nil, All) {
		if got := h.Get(f.Name); got != f.Value {
			t.Errorf("%s: got %q, want %q", f.Name, got, f.Value)
		}
	}
	if _, ok := h["Retry-After"]; ok != (v.RetryAfter != math.MaxInt64) {
		t.Errorf("Retry-After present %v, want %v", ok, !ok)
	}
}

func TestWriteDeniedModes(t *testing.T) {
	for _, tt := range []struct {
		mode Mode
		want []string
	}{
		{All, []string{"Content-Type", "Ratelimit", "Ratelimit-Policy", "Retry-After", "X-Content-Type-Options", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}},
		{IETF, []string{"Content-Type", "Ratelimit", "Ratelimit-Policy", "Retry-After", "X-Content-Type-Options"}},
		{Off, []string{"Content-Type", "Retry-After", "X-Content-Type-Options"}},
	} {
		w := httptest.NewRecorder()
		WriteDenied(w, nil, denied, tt.mode, "")
		if got := slices.Sorted(maps.Keys(w.Header())); !slices.Equal(got, tt.want) {
			t.Errorf("mode %v: got headers %q, want %q", tt.mode, got, tt.want)
		}
	}
}

// TestWriteDeniedOverHTTP denies through a real server and client: the
// headers arrive, parse back, and the body decodes as its Content-Type
// says.
func TestWriteDeniedOverHTTP(t *testing.T) {
	v := denied
	v.PartitionKey = []byte("alice")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteDenied(w, r, v, All, "over the limit \"per_minute\"")
	}))
	defer srv.Close()
	for _, tt := range []struct {
		accept string
		ct     string
	}{
		{"", JSON},
		{"application/problem+json, application/json;q=0.5", Problem},
		{"application/problem+json;q=0.5, application/json", JSON},
	} {
		t.Run(tt.ct+" for "+tt.accept, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("status: got %d, want 429", resp.StatusCode)
			}
			checkDenied(t, resp.Header, v, tt.ct)
			ps := ParsePolicies(resp.Header.Values("RateLimit-Policy"))
			if len(ps) != 1 || ps[0].Name != "per_minute" || ps[0].Quota != 10 || string(ps[0].PartitionKey) != "alice" {
				t.Errorf("RateLimit-Policy: got %+v, want per_minute, 10, alice", ps)
			}
			if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); !ok || d != 3*time.Second {
				t.Errorf("Retry-After: got %v %v, want 3s", d, ok)
			}
			var body struct {
				Error            string   `json:"error"`
				Detail           string   `json:"detail"`
				Message          string   `json:"message"`
				RetryAfter       int64    `json:"retry_after"`
				ViolatedPolicies []string `json:"violated-policies"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			msg := body.Message
			if tt.ct == Problem {
				msg = body.Detail
				if !reflect.DeepEqual(body.ViolatedPolicies, []string{"per_minute"}) {
					t.Errorf("violated-policies: got %q, want [per_minute]", body.ViolatedPolicies)
				}
			} else if body.Error != "rate_limited" {
				t.Errorf("error: got %q, want rate_limited", body.Error)
			}
			if msg != `over the limit "per_minute"` || body.RetryAfter != 3 {
				t.Errorf("body: got %+v, want the message and retry_after 3", body)
			}
		})
	}
}
