// Package jsonapi serves the rate limit check over plain HTTP and JSON,
// for clients without gRPC: POST /v1/check takes what an RLS
// ShouldRateLimit request carries and answers the same statuses; POST
// /v1/report takes the same request and charges its hits without
// deciding, for a cost known only after a request was served.
package jsonapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/rules"
)

// TracerName names the tracer a Handler's Tracer should come from.
const TracerName = "github.com/bouncerhq/bouncer/jsonapi"

// DefaultMaxBody bounds a request body when Handler.MaxBody is 0.
const DefaultMaxBody = 64 << 10

// Handler serves POST /v1/check. A request over a limit is answered 429
// with its CheckResponse, or, when the client's Accept prefers
// application/problem+json, with the problem details of
// header.WriteDenied. It is safe for concurrent use.
type Handler struct {
	// Engine decides. Required.
	Engine *rules.Engine

	// Headers selects the rate-limit headers written on every answer.
	Headers header.Mode

	// Tracer, if not nil, traces every request (a child of the caller's
	// trace, from its traceparent header); nil traces nothing. Take it
	// from otel.Tracer(TracerName) once a tracer provider is set up.
	Tracer trace.Tracer

	// MaxBody bounds the request body in bytes; 0 means DefaultMaxBody.
	// A longer body is answered 413.
	MaxBody int64
}

// CheckRequest is the body of POST /v1/check.
type CheckRequest struct {
	Domain      string       `json:"domain"`
	Descriptors []Descriptor `json:"descriptors"`
	HitsAddend  uint64       `json:"hits_addend,omitempty"`

	// Model names the model a check's hits, an estimate of tokens, are
	// reserved at, under a rule with a price (rules.Request.Model).
	Model string `json:"model,omitempty"`

	// Usage, on POST /v1/report, is what the request used: a rule with
	// a price is charged its cost, any other its tokens, in place of
	// hits_addend (rules.Request.Usage).
	Usage *Usage `json:"usage,omitempty"`
}

// Usage is a request's model and tokens of each kind.
type Usage struct {
	Model        string `json:"model,omitempty"`
	InputTokens  int64  `json:"input_tokens,omitempty"`
	OutputTokens int64  `json:"output_tokens,omitempty"`
	CachedTokens int64  `json:"cached_tokens,omitempty"`
}

// Descriptor is one descriptor of a CheckRequest.
type Descriptor struct {
	Entries    []Entry   `json:"entries"`
	HitsAddend *uint64   `json:"hits_addend,omitempty"`
	Limit      *Override `json:"limit,omitempty"`
}

// Entry is one key/value pair.
type Entry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Override is a descriptor's own limit, as in RLS.
type Override struct {
	RequestsPerUnit uint32 `json:"requests_per_unit"`
	Unit            string `json:"unit"`
}

// CheckResponse is the answer to POST /v1/check.
type CheckResponse struct {
	OverallCode string   `json:"overall_code"`
	Statuses    []Status `json:"statuses"`

	// Denial is set when the request is over a limit: error
	// "rate_limited", message (which limit) and retry_after (the seconds
	// until it would pass; absent when it never can), the body of every
	// denial Bouncer writes.
	header.Denial
}

// Status is one descriptor's answer.
type Status struct {
	Code               string        `json:"code"`
	CurrentLimit       *CurrentLimit `json:"current_limit,omitempty"`
	LimitRemaining     uint32        `json:"limit_remaining"`
	DurationUntilReset float64       `json:"duration_until_reset_seconds,omitempty"`
	Shadowed           bool          `json:"shadowed,omitempty"`
	Degraded           bool          `json:"degraded,omitempty"`
	// Replaced marks a descriptor whose rule another rule of the request
	// replaced: it was not counted, and its limit_remaining means nothing.
	Replaced bool `json:"replaced,omitempty"`

	// Budget, for a rule with a price, is its limit in money.
	Budget *Budget `json:"budget,omitempty"`
}

// Budget is a priced limit in its currency: amounts are decimal strings
// with two to six decimals ("49.50"), exact where a float would not be.
type Budget struct {
	Currency  string `json:"currency"`
	Remaining string `json:"remaining"`
	Limit     string `json:"limit"`
}

// CurrentLimit is a status's limit.
type CurrentLimit struct {
	Name            string  `json:"name,omitempty"`
	RequestsPerUnit uint32  `json:"requests_per_unit"`
	Unit            string  `json:"unit"`
	WindowSeconds   float64 `json:"window_seconds"`
}

// errorBody is every error answer.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.serve(w, r, "POST /v1/check", h.Engine.Decide, h.write)
}

// Report returns the handler of POST /v1/report, which takes a
// CheckRequest and charges its hits (hits_addend, the request's or a
// descriptor's) to the limits of its descriptors without deciding
// (rules.Engine.Report): whatever the limits hold, past them if need be,
// a debt that later checks are refused until time pays it back. It is
// how a service meters what it learns a request cost once it has served
// it, such as an LLM's tokens. It answers 200 with a CheckResponse of
// the state after the charge, in which a descriptor whose limit has
// nothing left is OVER_LIMIT, or a 4xx JSON error for a request it
// cannot read; 501 not_supported when the store cannot charge.
func (h *Handler) Report() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, "POST /v1/report", h.Engine.Report, writeReport)
	})
}

// serve reads r's request, answers it with do, and writes the answer
// with write, in a span named name.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, name string, do func(context.Context, rules.Request) (rules.Response, error), write func(http.ResponseWriter, *http.Request, rules.Response)) {
	span := trace.SpanFromContext(r.Context()) // a no-op span unless traced
	if h.Tracer != nil {
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span = h.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		r = r.WithContext(ctx)
	}
	req, ok := h.read(w, r)
	if !ok {
		return
	}
	resp, err := do(r.Context(), req)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("bouncer.domain", req.Domain), attribute.Int("bouncer.descriptors", len(req.Descriptors)))
		if err == nil {
			span.SetAttributes(attribute.String("bouncer.overall_code", resp.Code.String()))
		}
	}
	if err != nil {
		span.RecordError(err)
		status, code := statusOf(err)
		writeError(w, status, code, err.Error())
		return
	}
	write(w, r, resp)
}

// read reads and parses r's request, or answers r with its error and
// reports false.
func (h *Handler) read(w http.ResponseWriter, r *http.Request) (rules.Request, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		return rules.Request{}, false
	}
	if !jsonContent(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be JSON: send Content-Type: application/json")
		return rules.Request{}, false
	}
	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body is over %d bytes", limit))
		} else {
			writeError(w, http.StatusBadRequest, "invalid_request", "could not read the body")
		}
		return rules.Request{}, false
	}
	if err := validText(body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return rules.Request{}, false
	}
	req, err := parse(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return rules.Request{}, false
	}
	return req, true
}

// write answers r with resp: 200 with the statuses, or 429 with the
// denial, as JSON or as the problem the client asked for.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, resp rules.Response) {
	out := response(resp)
	if resp.Degraded() {
		w.Header().Set(header.Degraded, "true")
	}
	if resp.Code != rules.OverLimit {
		setHeaders(w, resp.Headers(h.Headers))
		writeJSON(w, http.StatusOK, out)
		return
	}
	v, _ := resp.Values()
	if header.PrefersProblem(r.Header.Values("Accept")) {
		// The client asked for the body every denial has; its problem
		// type defines no member for the statuses, which stay out.
		header.WriteDenied(w, r, v, h.Headers, resp.DenialMessage())
		return
	}
	setHeaders(w, v.Append(nil, h.Headers))
	out.Denial = v.Denial(resp.DenialMessage())
	writeJSON(w, http.StatusTooManyRequests, out)
}

// writeReport answers a report: 200 with the state after the charge.
func writeReport(w http.ResponseWriter, _ *http.Request, resp rules.Response) {
	if resp.Degraded() {
		w.Header().Set(header.Degraded, "true")
	}
	writeJSON(w, http.StatusOK, response(resp))
}

// response is the body of resp, without its denial.
func response(resp rules.Response) CheckResponse {
	out := CheckResponse{OverallCode: resp.Code.String(), Statuses: make([]Status, len(resp.Statuses))}
	for i, st := range resp.Statuses {
		s := Status{Code: st.Code.String(), LimitRemaining: st.Remaining, Shadowed: st.Shadowed, Degraded: st.Degraded, Replaced: st.Replaced()}
		if l := st.Limit; l != nil {
			s.CurrentLimit = &CurrentLimit{Name: l.Name, RequestsPerUnit: l.RequestsPerUnit, Unit: strings.ToUpper(l.Unit.String()), WindowSeconds: window(l).Seconds()}
			s.DurationUntilReset = st.ResetAfter.Seconds()
		}
		if b := st.Budget; b.Currency != "" {
			s.Budget = &Budget{Currency: b.Currency, Remaining: rules.FormatMoney(b.Remaining), Limit: rules.FormatMoney(b.Limit)}
		}
		out.Statuses[i] = s
	}
	return out
}

func setHeaders(w http.ResponseWriter, fields []header.Field) {
	for _, f := range fields {
		w.Header().Set(f.Name, f.Value) // names are case-insensitive: Go sends Ratelimit-Policy
	}
}

func window(l *rules.CurrentLimit) time.Duration {
	if l.Window > 0 {
		return l.Window
	}
	return l.Unit.Duration()
}

// jsonContent reports whether a request of Content-Type ct carries JSON:
// application/json, a +json type, or no type at all (a client that says
// nothing is read as JSON).
func jsonContent(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// validText reports an error if body is not valid UTF-8 or escapes a
// lone UTF-16 surrogate (\ud800 without its pair): encoding/json would
// turn either into U+FFFD, so that distinct values sent by a client
// would share one key.
func validText(body []byte) error {
	if !utf8.Valid(body) {
		return errors.New("the body is not valid UTF-8")
	}
	in := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			in = !in
		case c == '\\' && in && i+1 < len(body):
			i++
			if body[i] != 'u' {
				continue
			}
			r, ok := hex4(body, i+1)
			if !ok {
				continue // malformed: the decoder reports it
			}
			i += 4
			switch {
			case r >= 0xdc00 && r <= 0xdfff:
				return errors.New("the body escapes a lone UTF-16 surrogate: not valid Unicode text")
			case r >= 0xd800 && r <= 0xdbff:
				lo, ok := hex4(body, i+3)
				if i+2 >= len(body) || body[i+1] != '\\' || body[i+2] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
					return errors.New("the body escapes a lone UTF-16 surrogate: not valid Unicode text")
				}
				i += 6
			}
		}
	}
	return nil
}

// hex4 parses the four hex digits of b at i.
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// parse reads a CheckRequest strictly: unknown fields and trailing data
// are errors.
func parse(body []byte) (rules.Request, error) {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	var in CheckRequest
	if err := dec.Decode(&in); err != nil {
		return rules.Request{}, fmt.Errorf("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		// More would miss a stray ']' or '}', which ends no value.
		return rules.Request{}, errors.New("malformed JSON: data after the object")
	}
	if len(in.Descriptors) > rules.MaxDescriptors {
		return rules.Request{}, fmt.Errorf("%d descriptors, at most %d", len(in.Descriptors), rules.MaxDescriptors)
	}
	out := rules.Request{Domain: in.Domain, HitsAddend: in.HitsAddend, Model: in.Model, Descriptors: make([]rules.Descriptor, len(in.Descriptors))}
	if u := in.Usage; u != nil {
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedTokens < 0 {
			return rules.Request{}, errors.New("usage: token counts must not be negative")
		}
		out.Usage = &rules.Usage{Model: u.Model, Input: u.InputTokens, Output: u.OutputTokens, Cached: u.CachedTokens}
	}
	for i, d := range in.Descriptors {
		o := &out.Descriptors[i]
		o.Hits = d.HitsAddend
		o.Entries = make([]rules.Entry, len(d.Entries))
		for j, e := range d.Entries {
			o.Entries[j] = rules.Entry{Key: e.Key, Value: e.Value}
		}
		if d.Limit != nil {
			u, ok := rules.ParseUnit(d.Limit.Unit)
			if !ok {
				return rules.Request{}, fmt.Errorf("descriptors[%d].limit.unit: %q is not second, minute, hour, day, week, month or year", i, d.Limit.Unit)
			}
			o.Limit = &rules.Override{RequestsPerUnit: d.Limit.RequestsPerUnit, Unit: u}
		}
	}
	return out, nil
}

// statusOf maps an error of Decide to an HTTP status and error code: the
// one table of this transport.
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, bouncer.ErrInvalidRequest):
		return http.StatusBadRequest, "invalid_request"
	case errors.Is(err, rules.ErrUnknownDomain):
		return http.StatusNotFound, "unknown_domain"
	case errors.Is(err, errors.ErrUnsupported):
		return http.StatusNotImplemented, "not_supported"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return 499, "canceled"
	}
	return http.StatusServiceUnavailable, "store_unavailable"
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
