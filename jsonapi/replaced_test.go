package jsonapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer/jsonapi"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

// A descriptor whose rule another rule replaced says so: its OK and its
// limit_remaining of 0 are not a limit.
func TestCheckMarksReplacedDescriptors(t *testing.T) {
	c, err := rules.Parse("r.yaml", []byte(`domain: r
rules:
  - name: per_user
    match: [{key: user}]
    limits: [{rate: 10, period: 1m}]
  - name: exports
    match: [{key: route, value: /exports}, {key: user}]
    replaces: [per_user]
    limits: [{rate: 2, period: 1h}]
`))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	defer st.Close()
	h := &jsonapi.Handler{Engine: rules.NewEngine(c, st)}
	body := `{"domain":"r","descriptors":[{"entries":[{"key":"user","value":"u"}]},{"entries":[{"key":"route","value":"/exports"},{"key":"user","value":"u"}]}]}`
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, r)
	var out jsonapi.CheckResponse
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || len(out.Statuses) != 2 {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	if !out.Statuses[0].Replaced || out.Statuses[1].Replaced || out.Statuses[1].CurrentLimit == nil {
		t.Fatalf("statuses %+v, want the first replaced and the second limited", out.Statuses)
	}
	if !strings.Contains(w.Body.String(), `"replaced":true`) {
		t.Fatalf("body %s, want replaced: true on the replaced descriptor", w.Body)
	}
}
