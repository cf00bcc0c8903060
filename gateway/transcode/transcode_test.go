package transcode_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bouncerhq/bouncer/gateway/transcode"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// answer is what the HTTP client got.
type answer struct {
	status int
	header http.Header
	body   string
}

// request is one HTTP request of a test: a body is sent as
// application/json unless header sets Content-Type.
type request struct {
	method, path, body string
	header             http.Header
}

func do(t *testing.T, base string, r request) answer {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, base+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// decodeJSON decodes s, failing the test if it is not JSON.
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("body %q is not JSON: %v", s, err)
	}
	return v
}

// checkJSON fails the test unless got and want are equal JSON values.
func checkJSON(t *testing.T, got, want string) {
	t.Helper()
	if g, w := decodeJSON(t, got), decodeJSON(t, want); !reflect.DeepEqual(g, w) {
		t.Errorf("got body %s, want %s", got, want)
	}
}

// checkError fails the test unless a is an error answer of httpStatus
// and the code name.
func checkError(t *testing.T, a answer, httpStatus int, code string) map[string]any {
	t.Helper()
	if a.status != httpStatus {
		t.Errorf("got status %d, want %d (body %s)", a.status, httpStatus, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", ct)
	}
	body, ok := decodeJSON(t, a.body).(map[string]any)
	if !ok {
		t.Fatalf("got body %s, want a JSON object", a.body)
	}
	if body["error"] != code {
		t.Errorf("got error %v, want %s (body %s)", body["error"], code, a.body)
	}
	if _, ok := body["message"].(string); !ok {
		t.Errorf("got message %v, want a string", body["message"])
	}
	if _, ok := body["details"].([]any); !ok {
		t.Errorf("got details %v, want an array", body["details"])
	}
	return body
}

func TestMethods(t *testing.T) {
	cc, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	const svc = "/test.v1.Users/"
	want := []transcode.Binding{
		{"GET", "/v1/users/{id}", svc + "GetUser"},
		{"GET", "/v1/{name=orgs/*/users/**}", svc + "GetUser"},
		{"POST", "/v1/users", svc + "CreateUser"},
		{"PATCH", "/v1/users/{user.id}", svc + "UpdateUser"},
		{"PUT", "/v1/users/{user.id}", svc + "UpdateUser"},
		{"GET", "/v1/users", svc + "ListUsers"},
		{"GET", "/v1/users:list", svc + "ListUsers"},
		{"GET", "/v1/users:watch", svc + "WatchUsers"},
		{"POST", "/test.v1.Users/DeleteUser", svc + "DeleteUser"},
		{"DELETE", "/v1/users/{id}", svc + "RemoveUser"},
		{"POST", "/v1/users/{id}:undelete", svc + "UndeleteUser"},
		{"PURGE", "/v1/cache/{key=**}", svc + "Purge"},
		{"GET", "/v1/fail/{code}", svc + "Fail"},
		{"GET", "/v1/whoami", svc + "Whoami"},
		{"POST", "/test.v1.Users/Slow", svc + "Slow"},
	}
	path := writeSet(t, usersFile())
	for _, services := range [][]string{nil, {usersService}} {
		h, err := transcode.New(transcode.Options{DescriptorSet: path, Services: services, Conn: cc, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Methods(); !slices.Equal(got, want) {
			t.Errorf("Services %q: got Methods\n%v\nwant\n%v", services, got, want)
		}
	}
}

func TestBindings(t *testing.T) {
	base := serve(t, transcode.Options{})
	user := `{"id":"7","name":"Ann","email":"ann@example.com","role":"ROLE_ADMIN","tags":["a","b"],"address":{"city":"Paris","zip":75001}}`
	for _, tt := range []struct {
		name string
		request
		want string
	}{
		{"get", request{method: "GET", path: "/v1/users/42"}, `{"id":"42"}`},
		{"get/escaped variable", request{method: "GET", path: "/v1/users/a%2Fb%20c%3A"}, `{"id":"a/b c:"}`},
		{"get/multi-segment variable", request{method: "GET", path: "/v1/orgs/acme/users/a/b%2Fc%20d"}, `{"name":"orgs/acme/users/a/b%2Fc d"}`},
		{"get/** of no segment", request{method: "GET", path: "/v1/orgs/acme/users"}, `{"name":"orgs/acme/users"}`},
		{"post/body *", request{method: "POST", path: "/v1/users", body: user}, user},
		{"post/field names and enum number", request{method: "POST", path: "/v1/users", body: `{"id":"8","role":2,"address":{"city":"Lyon"}}`},
			`{"id":"8","role":"ROLE_MEMBER","address":{"city":"Lyon"}}`},
		{"post/empty body", request{method: "POST", path: "/v1/users"}, `{}`},
		{"patch/body field, path in it", request{method: "PATCH", path: "/v1/users/7?update_mask=name,email", body: `{"id":"ignored","name":"Bo"}`},
			`{"user":{"id":"7","name":"Bo"},"updateMask":"name,email"}`},
		{"patch/merge-patch+json", request{method: "PATCH", path: "/v1/users/7", body: `{"name":"Bo"}`,
			header: http.Header{"Content-Type": {"application/merge-patch+json; charset=utf-8"}}}, `{"user":{"id":"7","name":"Bo"}}`},
		{"put/body * with a nested path field", request{method: "PUT", path: "/v1/users/7", body: `{"user":{"id":"6","name":"Cy"},"updateMask":"name"}`},
			`{"user":{"id":"7","name":"Cy"},"updateMask":"name"}`},
		{"get/query", request{method: "GET", path: "/v1/users?page_size=2"},
			`{"users":[{"id":"u1"},{"id":"u2"}],"nextPageToken":"next","request":{"pageSize":2}}`},
		{"get/response_body", request{method: "GET", path: "/v1/users:list?page_size=1"}, `[{"id":"u1"}]`},
		{"get/response_body unset", request{method: "GET", path: "/v1/users:list"}, `[]`},
		{"default binding", request{method: "POST", path: "/test.v1.Users/DeleteUser", body: `{"id":"9"}`}, `{}`},
		{"delete", request{method: "DELETE", path: "/v1/users/9"}, `{}`},
		{"post/verb, scalar body field", request{method: "POST", path: "/v1/users/9:undelete", body: `"by mistake"`},
			`{"id":"9","name":"by mistake"}`},
		{"custom", request{method: "PURGE", path: "/v1/cache/a/b/c"}, `{"key":"a/b/c"}`},
		{"custom/** of no segment", request{method: "PURGE", path: "/v1/cache"}, `{}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, base, tt.request)
			if a.status != http.StatusOK {
				t.Fatalf("got status %d, want 200 (body %s)", a.status, a.body)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", ct)
			}
			checkJSON(t, a.body, tt.want)
		})
	}
}

func TestQuery(t *testing.T) {
	base := serve(t, transcode.Options{})
	for _, tt := range []struct {
		query string
		want  string // the request the server saw
	}{
		{"page_size=0", `{}`},
		{"pageSize=0&page_token=abc", `{"pageToken":"abc"}`},
		{"tags=a&tags=b&tags=", `{"tags":["a","b",""]}`},
		{"role=ROLE_ADMIN", `{"role":"ROLE_ADMIN"}`},
		{"role=2", `{"role":"ROLE_MEMBER"}`},
		{"role=7", `{"role":7}`},
		{"filter.city=Paris&filter.min_zip=75000", `{"filter":{"city":"Paris","minZip":75000}}`},
		{"filter.minZip=-1", `{"filter":{"minZip":-1}}`},
		{"min_age=30", `{"minAge":30}`},
		{"minAge=0", `{"minAge":0}`},
		{"since=2026-01-02T03:04:05Z", `{"since":"2026-01-02T03:04:05Z"}`},
		{"ttl=1.5s", `{"ttl":"1.500s"}`},
		{"active=true&score=0.5", `{"active":true,"score":0.5}`},
		{"cursor=AQID", `{"cursor":"AQID"}`},
		{"cursor=-_8", `{"cursor":"+/8="}`},
		{"ids=1&ids=-2", `{"ids":["1","-2"]}`},
		{"big=18446744073709551615", `{"big":"18446744073709551615"}`},
		{"order_by=name", `{"orderBy":"name"}`},
		{"page_token=a%26b%3Dc+d", `{"pageToken":"a&b=c d"}`},
	} {
		t.Run(tt.query, func(t *testing.T) {
			a := do(t, base, request{method: "GET", path: "/v1/users?" + tt.query})
			if a.status != http.StatusOK {
				t.Fatalf("got status %d, want 200 (body %s)", a.status, a.body)
			}
			got, _ := json.Marshal(decodeJSON(t, a.body).(map[string]any)["request"])
			if string(got) == "null" {
				got = []byte("{}")
			}
			checkJSON(t, string(got), tt.want)
		})
	}
}

func TestBadRequests(t *testing.T) {
	base := serve(t, transcode.Options{MaxBodyBytes: 256})
	big := `{"name":"` + strings.Repeat("x", 300) + `"}`
	for _, tt := range []struct {
		name string
		request
		status int
		code   string
	}{
		{"query/not a number", request{method: "GET", path: "/v1/users?page_size=abc"}, 400, "invalid_argument"},
		{"query/out of range", request{method: "GET", path: "/v1/users?page_size=99999999999"}, 400, "invalid_argument"},
		{"query/unknown parameter", request{method: "GET", path: "/v1/users?nope=1"}, 400, "invalid_argument"},
		{"query/unknown nested parameter", request{method: "GET", path: "/v1/users?filter.nope=1"}, 400, "invalid_argument"},
		{"query/below a scalar", request{method: "GET", path: "/v1/users?page_size.x=1"}, 400, "invalid_argument"},
		{"query/unknown enum name", request{method: "GET", path: "/v1/users?role=ROLE_NOPE"}, 400, "invalid_argument"},
		{"query/singular set twice", request{method: "GET", path: "/v1/users?page_size=1&pageSize=2"}, 400, "invalid_argument"},
		{"query/a message", request{method: "GET", path: "/v1/users?filter=x"}, 400, "invalid_argument"},
		{"query/a Struct", request{method: "GET", path: "/v1/users?labels=x"}, 400, "invalid_argument"},
		{"query/bad timestamp", request{method: "GET", path: "/v1/users?since=yesterday"}, 400, "invalid_argument"},
		{"query/bad bool", request{method: "GET", path: "/v1/users?active=maybe"}, 400, "invalid_argument"},
		{"query/bad base64", request{method: "GET", path: "/v1/users?cursor=***"}, 400, "invalid_argument"},
		{"query/two of a oneof", request{method: "GET", path: "/v1/users?order_by=a&order_desc=b"}, 400, "invalid_argument"},
		{"query/invalid UTF-8", request{method: "GET", path: "/v1/users?page_token=%FF"}, 400, "invalid_argument"},
		{"query/semicolon", request{method: "GET", path: "/v1/users?a;b"}, 400, "invalid_argument"},
		{"query/field of the path", request{method: "GET", path: "/v1/users/42?id=43"}, 400, "invalid_argument"},
		{"query/with body *", request{method: "POST", path: "/v1/users?name=x", body: `{}`}, 400, "invalid_argument"},
		{"query/field of the body", request{method: "PATCH", path: "/v1/users/7?user.name=x", body: `{}`}, 400, "invalid_argument"},
		{"path/invalid UTF-8", request{method: "GET", path: "/v1/users/%FF"}, 400, "invalid_argument"},
		{"path/not a number", request{method: "GET", path: "/v1/fail/x"}, 400, "invalid_argument"},
		{"body/malformed JSON", request{method: "POST", path: "/v1/users", body: `{"id":`}, 400, "invalid_argument"},
		{"body/unknown field", request{method: "POST", path: "/v1/users", body: `{"nope":1}`}, 400, "invalid_argument"},
		{"body/wrong type", request{method: "POST", path: "/v1/users", body: `{"id":5}`}, 400, "invalid_argument"},
		{"body/not an object", request{method: "POST", path: "/v1/users", body: `[1]`}, 400, "invalid_argument"},
		{"body/two values", request{method: "POST", path: "/v1/users", body: `{} {}`}, 400, "invalid_argument"},
		{"body/field escaping its field", request{method: "POST", path: "/v1/users/9:undelete", body: `"x","id":"10"`}, 400, "invalid_argument"},
		{"body/unknown field of the body field", request{method: "PATCH", path: "/v1/users/7", body: `{"nope":1}`}, 400, "invalid_argument"},
		{"body/text/plain", request{method: "POST", path: "/v1/users", body: `{}`, header: http.Header{"Content-Type": {"text/plain"}}}, 415, "invalid_argument"},
		{"body/no Content-Type", request{method: "POST", path: "/v1/users", body: `{}`, header: http.Header{"Content-Type": nil}}, 415, "invalid_argument"},
		{"body/too large", request{method: "POST", path: "/v1/users", body: big}, 413, "resource_exhausted"},
		{"header/not ASCII", request{method: "GET", path: "/v1/whoami", header: http.Header{"X-Bouncer-User": {"caf\xc3\xa9"}}}, 400, "invalid_argument"},
		{"unknown path", request{method: "GET", path: "/v2/users"}, 404, "not_found"},
		{"empty segment", request{method: "GET", path: "/v1/users/"}, 404, "not_found"},
		{"wrong verb", request{method: "POST", path: "/v1/users/9:delete", body: `{}`}, 405, "unimplemented"},
		{"client streaming", request{method: "POST", path: "/v1/upload", body: `{}`}, 501, "unimplemented"},
		{"bidi streaming", request{method: "POST", path: "/test.v1.Users/Chat", body: `{}`}, 501, "unimplemented"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkError(t, do(t, base, tt.request), tt.status, tt.code)
		})
	}
}

func TestBodyTooLargeChunked(t *testing.T) {
	base := serve(t, transcode.Options{MaxBodyBytes: 256})
	// A body of unknown length is cut at the limit as it is read.
	body := io.MultiReader(strings.NewReader(`{"name":"`), strings.NewReader(strings.Repeat("x", 300)+`"}`))
	req, err := http.NewRequest("POST", base+"/v1/users", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if req.ContentLength != 0 {
		t.Fatalf("got ContentLength %d, want 0 (unknown)", req.ContentLength)
	}
	checkError(t, answer{resp.StatusCode, resp.Header, string(b)}, 413, "resource_exhausted")
}

func TestMethodNotAllowed(t *testing.T) {
	base := serve(t, transcode.Options{})
	for _, tt := range []struct {
		method, path, allow string
	}{
		{"POST", "/v1/users/7", "DELETE, GET, PATCH, PUT"},
		{"DELETE", "/v1/users", "GET, POST"},
		{"GET", "/test.v1.Users/DeleteUser", "POST"},
		{"HEAD", "/v1/whoami", "GET"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			a := do(t, base, request{method: tt.method, path: tt.path})
			if a.status != http.StatusMethodNotAllowed {
				t.Fatalf("got status %d, want 405", a.status)
			}
			if got := a.header.Get("Allow"); got != tt.allow {
				t.Errorf("got Allow %q, want %q", got, tt.allow)
			}
			if tt.method != "HEAD" {
				checkError(t, a, 405, "unimplemented")
			}
		})
	}
}

func TestErrors(t *testing.T) {
	base := serve(t, transcode.Options{})
	errorInfo := map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "ASKED", "domain": "test.v1"}
	for _, tt := range []struct {
		code   int
		status int
		name   string
	}{
		{1, 499, "cancelled"},
		{2, 500, "unknown"},
		{3, 400, "invalid_argument"},
		{4, 504, "deadline_exceeded"},
		{5, 404, "not_found"},
		{6, 409, "already_exists"},
		{7, 403, "permission_denied"},
		{8, 429, "resource_exhausted"},
		{9, 400, "failed_precondition"},
		{10, 409, "aborted"},
		{11, 400, "out_of_range"},
		{12, 501, "unimplemented"},
		{13, 500, "internal"},
		{14, 503, "unavailable"},
		{15, 500, "data_loss"},
		{16, 401, "unauthenticated"},
		{99, 500, "unknown"},
	} {
		t.Run(tt.name+"/"+strconv.Itoa(tt.code), func(t *testing.T) {
			a := do(t, base, request{method: "GET", path: "/v1/fail/" + strconv.Itoa(tt.code) + "?message=boom"})
			body := checkError(t, a, tt.status, tt.name)
			if body["message"] != "boom" {
				t.Errorf("got message %v, want boom", body["message"])
			}
			if got, want := body["details"], []any{errorInfo}; !reflect.DeepEqual(got, want) {
				t.Errorf("got details %v, want %v", got, want)
			}
			if got := a.header.Get("Grpc-Metadata-X-Failed"); got != "yes" {
				t.Errorf("got Grpc-Metadata-X-Failed %q, want yes", got)
			}
			if got := a.header.Values("Retry-After"); got != nil {
				t.Errorf("got Retry-After %q, want none", got)
			}
		})
	}
	t.Run("ok", func(t *testing.T) {
		a := do(t, base, request{method: "GET", path: "/v1/fail/0"})
		if a.status != 200 {
			t.Fatalf("got status %d, want 200", a.status)
		}
		checkJSON(t, a.body, `{}`)
	})
	t.Run("resource_exhausted with RetryInfo", func(t *testing.T) {
		a := do(t, base, request{method: "GET", path: "/v1/fail/8?message=slow+down&retry_seconds=3"})
		body := checkError(t, a, 429, "resource_exhausted")
		if got := a.header.Get("Retry-After"); got != "3" {
			t.Errorf("got Retry-After %q, want 3", got)
		}
		want := []any{errorInfo, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}}
		if got := body["details"]; !reflect.DeepEqual(got, want) {
			t.Errorf("got details %v, want %v", got, want)
		}
	})
	t.Run("unavailable with RetryInfo", func(t *testing.T) {
		a := do(t, base, request{method: "GET", path: "/v1/fail/14?retry_seconds=3"})
		checkError(t, a, 503, "unavailable")
		if got := a.header.Values("Retry-After"); got != nil {
			t.Errorf("got Retry-After %q, want none: only resource_exhausted says when to come back", got)
		}
	})
}

func TestTimeout(t *testing.T) {
	base := serve(t, transcode.Options{Timeout: 50 * time.Millisecond})
	a := do(t, base, request{method: "POST", path: "/test.v1.Users/Slow", body: `{}`})
	checkError(t, a, 504, "deadline_exceeded")
}

func TestMetadata(t *testing.T) {
	base := serve(t, transcode.Options{})
	a := do(t, base, request{method: "GET", path: "/v1/whoami", header: http.Header{
		"Authorization":    {"Bearer t0k3n"},
		"X-Bouncer-User":   {"ann"},
		"X-Bouncer-Roles":  {"admin", "dev"},
		"X-Request-Id":     {"req-1"},
		"X-Bouncer-Hop":    {"listed in Connection"},
		"Connection":       {"X-Bouncer-Hop"},
		"Cookie":           {"session=1"},
		"X-Other":          {"o"},
		"Grpc-Metadata-Io": {"not read"},
		"Te":               {"trailers"},
	}})
	if a.status != http.StatusOK {
		t.Fatalf("got status %d, want 200 (body %s)", a.status, a.body)
	}
	got := decodeJSON(t, a.body).(map[string]any)
	for key, want := range map[string]string{
		"authorization":   "Bearer t0k3n",
		"x-bouncer-user":  "ann",
		"x-bouncer-roles": "admin,dev",
		"x-request-id":    "req-1",
	} {
		if got[key] != want {
			t.Errorf("upstream got %s %v, want %q", key, got[key], want)
		}
	}
	for _, key := range []string{"x-bouncer-hop", "connection", "cookie", "x-other", "grpc-metadata-io", "io"} {
		if v, ok := got[key]; ok {
			t.Errorf("upstream got %s %v, want none", key, v)
		}
	}
	for name, want := range map[string][]string{
		"Grpc-Metadata-X-Served-By":  {"users-test"},
		"Grpc-Metadata-X-Trace-Bin":  {"AAEC"},
		"Grpc-Metadata-Content-Type": nil,
		"Grpc-Metadata-X-Trailer":    nil,
	} {
		if got := a.header.Values(name); !slices.Equal(got, want) {
			t.Errorf("got %s %q, want %q", name, got, want)
		}
	}
}

func TestServerStreaming(t *testing.T) {
	base := serve(t, transcode.Options{})
	t.Run("array", func(t *testing.T) {
		a := do(t, base, request{method: "GET", path: "/v1/users:watch?page_size=3"})
		if a.status != http.StatusOK {
			t.Fatalf("got status %d, want 200 (body %s)", a.status, a.body)
		}
		checkJSON(t, a.body, `[{"id":"w1"},{"id":"w2"},{"id":"w3"}]`)
		if got := a.header.Get("Grpc-Metadata-X-Stream"); got != "watch" {
			t.Errorf("got Grpc-Metadata-X-Stream %q, want watch", got)
		}
	})
	t.Run("empty", func(t *testing.T) {
		a := do(t, base, request{method: "GET", path: "/v1/users:watch"})
		if a.status != http.StatusOK {
			t.Fatalf("got status %d, want 200 (body %s)", a.status, a.body)
		}
		checkJSON(t, a.body, `[]`)
	})
	t.Run("error after messages", func(t *testing.T) {
		a := do(t, base, request{method: "GET", path: "/v1/users:watch?page_size=2&page_token=fail"})
		body := checkError(t, a, 503, "unavailable")
		if body["message"] != "watch broke" {
			t.Errorf("got message %v, want watch broke", body["message"])
		}
	})
}

// syncBuffer is a bytes.Buffer the server's goroutines write to while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogger(t *testing.T) {
	var buf syncBuffer
	base := serve(t, transcode.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	do(t, base, request{method: "GET", path: "/v1/fail/5"})  // 404: not logged
	do(t, base, request{method: "GET", path: "/v1/nope"})    // 404: not logged
	do(t, base, request{method: "GET", path: "/v1/fail/14"}) // 503: logged
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "error=unavailable") ||
		!strings.Contains(lines[0], "path=/v1/fail/14") {
		t.Errorf("got log %q, want one Warn line for the 503", lines)
	}
}
