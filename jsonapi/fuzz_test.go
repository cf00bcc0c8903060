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

// FuzzCheck posts arbitrary bodies: every answer is 200, 429 or a 4xx with
// a JSON error, never a 5xx or a panic.
func FuzzCheck(f *testing.F) {
	f.Add(`{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`)
	f.Add(`{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"hits_addend":0,"limit":{"requests_per_unit":1,"unit":"year"}}],"hits_addend":3}`)
	f.Add(`{"domain":"","descriptors":[]}`)
	f.Add(`{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"limit":{"requests_per_unit":4294967295,"unit":"second"}}]}`)
	f.Add(`[]`)
	c, err := rules.Parse("d.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"))
	if err != nil {
		f.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	f.Cleanup(func() { st.Close() })
	h := &jsonapi.Handler{Engine: rules.NewEngine(c, st)}
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body)))
		if w.Code >= 500 {
			t.Fatalf("got %d %s for %q", w.Code, w.Body, body)
		}
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("answer %d is not JSON: %v", w.Code, err)
		}
		if w.Code != http.StatusOK && w.Code != http.StatusTooManyRequests && out["error"] == nil {
			t.Fatalf("got %d without an error field: %s", w.Code, w.Body)
		}
	})
}
