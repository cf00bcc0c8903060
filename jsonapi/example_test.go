package jsonapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/jsonapi"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

func ExampleHandler() {
	config, err := rules.Parse("api.yaml", []byte(`
domain: api
descriptors:
  - key: user_id
    rate_limit: {unit: hour, requests_per_unit: 2}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	h := &jsonapi.Handler{Engine: rules.NewEngine(config, store), Headers: header.XRateLimit}

	body := `{"domain":"api","descriptors":[{"entries":[{"key":"user_id","value":"alice"}]}]}`
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body)))
		fmt.Println(w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After") != "")
	}
	// Output:
	// 200 1 false
	// 200 0 false
	// 429 0 true
}
