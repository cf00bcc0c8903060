package header

import (
	"encoding/json"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// Content types of a denied answer's body.
const (
	JSON    = "application/json"
	Problem = "application/problem+json" // RFC 9457 problem details
)

// QuotaExceeded is the problem type of a denied answer, registered by
// draft-ietf-httpapi-ratelimit-headers; QuotaExceededTitle is its title.
const (
	QuotaExceeded      = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	QuotaExceededTitle = "Quota Exceeded"
)

// DefaultMessage is the message of a denial given none.
const DefaultMessage = "over the limit"

// Denial is the JSON body of a denied answer:
// {"error":"rate_limited","message":"...","retry_after":N}. A transport
// whose answers carry more may embed it: its fields are then absent from
// answers that are not denials.
type Denial struct {
	Error   string `json:"error,omitempty"` // "rate_limited"
	Message string `json:"message,omitempty"`
	// RetryAfter is the whole seconds until the same request would pass,
	// as Retry-After says; nil when it never can.
	RetryAfter *int64 `json:"retry_after,omitempty"`
}

// ProblemDetails is the body of a denied answer as RFC 9457 problem
// details, of type QuotaExceeded.
type ProblemDetails struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail,omitempty"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"` // the names RateLimit-Policy gives
	RetryAfter       *int64   `json:"retry_after,omitempty"`       // as in Denial
}

// Denial returns the body of a denied answer under v, saying message
// (DefaultMessage if empty).
func (v Values) Denial(message string) Denial {
	if message == "" {
		message = DefaultMessage
	}
	return Denial{Error: "rate_limited", Message: message, RetryAfter: v.retryAfter()}
}

func (v Values) problem(message string) ProblemDetails {
	d := v.Denial(message)
	return ProblemDetails{
		Type: QuotaExceeded, Title: QuotaExceededTitle, Status: http.StatusTooManyRequests,
		Detail: d.Message, ViolatedPolicies: []string{v.policyName()}, RetryAfter: d.RetryAfter,
	}
}

// retryAfter is what Retry-After says of v in seconds (at least 1), or
// nil when it says nothing.
func (v Values) retryAfter() *int64 {
	if v.RetryAfter == math.MaxInt64 {
		return nil
	}
	s := max(Seconds(v.RetryAfter), 1)
	return &s
}

// WriteDenied answers r with 429: v's headers under mode (v is taken as
// denied; Retry-After is written in every mode), and a body saying
// message (DefaultMessage if empty). The body is v.Denial as JSON, or
// problem details (ProblemDetails, Content-Type: application/problem+json)
// when r's Accept prefers them (PrefersProblem). r may be nil: the body
// is then JSON.
func WriteDenied(w http.ResponseWriter, r *http.Request, v Values, mode Mode, message string) {
	v.Denied = true
	h := w.Header()
	v.Set(h, mode)
	var body any = v.Denial(message)
	ct := JSON
	if r != nil && PrefersProblem(r.Header.Values("Accept")) {
		body, ct = v.problem(message), Problem
	}
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(body)
}

// PrefersProblem reports whether the Accept field, every line of it,
// gives application/problem+json a higher quality than application/json.
// Each type takes the quality of the most specific range that matches it
// (the type itself, then application/*, then */*); parameters other than
// q are ignored, as are malformed ranges. A tie, no Accept at all and
// "*/*" alone all keep plain JSON.
func PrefersProblem(accept []string) bool {
	problem, plain := -1.0, -1.0
	problemRank, plainRank := 0, 0
	for _, line := range accept {
		for _, r := range splitAccept(line) {
			typ, params, err := mime.ParseMediaType(r)
			if err != nil {
				continue
			}
			q := 1.0
			if s, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(s, 64); err != nil || q < 0 || q > 1 {
					continue
				}
			}
			if rank := matchRank(typ, Problem); rank > problemRank || rank == problemRank && rank > 0 && q > problem {
				problem, problemRank = q, rank
			}
			if rank := matchRank(typ, JSON); rank > plainRank || rank == plainRank && rank > 0 && q > plain {
				plain, plainRank = q, rank
			}
		}
	}
	return problem > 0 && problem > plain
}

// matchRank says how specifically media range rng matches typ: 3 for the
// type itself, 2 for its type/*, 1 for */*, 0 for no match.
func matchRank(rng, typ string) int {
	switch {
	case rng == typ:
		return 3
	case rng == "*/*" || rng == "*": // "*" is what some old clients send
		return 1
	}
	if major, ok := strings.CutSuffix(rng, "/*"); ok && strings.HasPrefix(typ, major+"/") {
		return 2
	}
	return 0
}

// splitAccept splits an Accept line at the commas outside quoted strings.
func splitAccept(s string) []string {
	var out []string
	quoted, escaped, start := false, false, 0
	for i := range len(s) {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	out = append(out, s[start:])
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}
