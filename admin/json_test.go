package admin_test

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/admin"
)

// snakeCase is how every admin answer names its fields.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// neverZero are the times an answer always sets.
var neverZero = map[string]bool{
	"LiveView.Time":               true, // when the view was taken
	"LiveView.ReloadHistory.Time": true, // when the attempt was made
}

// TestJSONNames checks every field of every type the admin API answers
// with: a snake_case name of its own (never Go's field name), and a time
// left out when zero (never 0001-01-01T00:00:00Z).
func TestJSONNames(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(t *testing.T, typ reflect.Type, at string)
	walk = func(t *testing.T, typ reflect.Type, at string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() || seen[typ] {
			return
		}
		seen[typ] = true
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			tag, ok := f.Tag.Lookup("json")
			name, opts, _ := strings.Cut(tag, ",")
			switch {
			case !ok && f.Anonymous:
				walk(t, f.Type, at) // its fields are this one's
				continue
			case name == "-":
				continue
			case !ok || !snakeCase.MatchString(name):
				t.Errorf("%s.%s: json name %q, want snake_case", at, f.Name, name)
			}
			if f.Type == reflect.TypeFor[time.Time]() && !strings.Contains(opts, "omitzero") && !neverZero[at+"."+f.Name] {
				t.Errorf("%s.%s: a time without omitzero is written as 0001-01-01T00:00:00Z when zero", at, f.Name)
			}
			walk(t, f.Type, at+"."+f.Name)
		}
	}
	for _, v := range []any{admin.Endpoint{}, admin.RuleInfo{}, admin.KeyView{}, admin.LiveView{}} {
		typ := reflect.TypeOf(v)
		walk(t, typ, typ.Name())
	}
	if len(seen) < 8 {
		t.Errorf("walked %d types, want every one the answers hold", len(seen))
	}
}

// A command's own endpoints are served and listed after the API's.
func TestExtraEndpoints(t *testing.T) {
	things := admin.Extra{
		Endpoint: admin.Endpoint{Method: "GET", Path: "/v1/things", Description: "the command's things"},
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"things":[]}`)) }),
	}
	h := admin.Handler(admin.Options{Engine: keyEngine(t), Extra: []admin.Extra{things}})
	var index struct{ Endpoints []admin.Endpoint }
	get(t, h, "/", http.StatusOK, &index)
	if n := len(index.Endpoints); n == 0 || index.Endpoints[n-1] != things.Endpoint {
		t.Errorf("GET /: got %+v, want %+v last", index.Endpoints, things.Endpoint)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/things", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != `{"things":[]}` {
		t.Errorf("GET /v1/things: %d %s, want the command's answer", rec.Code, rec.Body)
	}
}
