package jsonapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/bouncerhq/bouncer/jsonapi"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

const pricedConfig = `
domain: llm
prices:
  models:
    currency: USD
    models:
      small: {input: 0.15, output: 0.60}
      large: {input: 3, output: 15}
rules:
  - name: budget
    match: [{key: api_key}]
    price: models
    limits: [{budget: 1, period: calendar_month}]
`

// A report of usage charges a priced rule at the model's prices, and
// every answer states the budget left in its currency; a check reserves
// its hits, tokens, at the model's highest price.
func TestBudget(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "llm.yaml"), []byte(pricedConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := rules.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	h := &jsonapi.Handler{Engine: rules.NewEngine(c, st)}
	budget := func(a answer) map[string]any {
		t.Helper()
		b, _ := a.body["statuses"].([]any)[0].(map[string]any)["budget"].(map[string]any)
		return b
	}
	a := serve(t, h.Report(), http.MethodPost, `{"domain":"llm","descriptors":[{"entries":[{"key":"api_key","value":"k"}]}],"usage":{"model":"large","input_tokens":100000,"output_tokens":10000}}`)
	if b := budget(a); a.status != 200 || b["currency"] != "USD" || b["remaining"] != "0.55" || b["limit"] != "1.00" {
		t.Fatalf("after $0.45 of usage: %d %v", a.status, a.body)
	}
	a = serve(t, h, http.MethodPost, `{"domain":"llm","model":"small","hits_addend":500000,"descriptors":[{"entries":[{"key":"api_key","value":"k"}]}]}`)
	if b := budget(a); a.status != 200 || b["remaining"] != "0.25" {
		t.Fatalf("a check of 500 000 small tokens reserves $0.30 (at the output price): %d %v", a.status, a.body)
	}
	a = serve(t, h, http.MethodPost, `{"domain":"llm","hits_addend":100000,"descriptors":[{"entries":[{"key":"api_key","value":"k"}]}]}`)
	if b := budget(a); a.status != 429 || b["remaining"] != "0.25" {
		t.Fatalf("100 000 tokens of no model reserve $1.50 (the table's highest), over what is left: %d %v", a.status, a.body)
	}
	a = serve(t, h.Report(), http.MethodPost, `{"domain":"llm","descriptors":[{"entries":[{"key":"api_key","value":"k"}]}],"usage":{"input_tokens":-1}}`)
	if a.status != 400 {
		t.Errorf("a negative count: %d %v, want 400", a.status, a.body)
	}
}
