package gateway_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

const budgetRules = `domain: llm
prices:
  models:
    currency: USD
    models:
      small: {input: 1, output: 2}
      large: {input: 10, output: 30}
rules:
  - name: budget
    match: [{key: x-key}]
    price: models
    limits: [{budget: 1, period: calendar_month, timezone: America/New_York}]
  - name: tokens
    match: [{key: x-key}, {key: kind, value: tokens}]
    limits: [{rate: 1000000, period: 1m}]
`

const budgetGateway = `rules: rules.yaml
listeners: [{addr: "127.0.0.1:0"}]
routes:
  - name: chat
    path_prefix: /chat
    upstreams: [UPSTREAM]
    limits:
      domain: llm
      descriptors: [["header:X-Key"], ["header:X-Key", "kind=tokens"]]
      usage:
        estimate: header:X-Estimate
        tokens: {input: "header:X-Input-Tokens", output: "header:X-Output-Tokens"}
        model: MODEL
`

// modelUpstream answers with the tokens the request asks for (X-In,
// X-Out), the input count in a header and the output count in a
// trailer, and names the model of the request's JSON body in a
// response header X-Model.
func modelUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Model string }
		json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Trailer", "X-Output-Tokens")
		w.Header().Set("X-Input-Tokens", r.Header.Get("X-In"))
		w.Header().Set("X-Model", body.Model)
		io.WriteString(w, "a completion")
		w.Header().Set("X-Output-Tokens", r.Header.Get("X-Out"))
	})
}

// A budget in dollars a calendar month: each request reserves its
// estimate at the model's highest price and is charged its input and
// output tokens at the model's prices, the model read from the request's
// body (or from the upstream's answer); every answer states the budget
// left; once it is spent, requests are refused until the month ends in
// New York, and the token limit beside it counts tokens.
func TestRouteBudget(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"body:model", "answer:X-Model"} {
		t.Run(model, func(t *testing.T) {
			upstream := httptest.NewServer(modelUpstream())
			t.Cleanup(upstream.Close)
			yaml := strings.NewReplacer("UPSTREAM", upstream.URL, "MODEL", model).Replace(budgetGateway)
			cfg, err := gateway.Parse("gateway.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			rc, err := rules.Parse("rules.yaml", []byte(budgetRules))
			if err != nil {
				t.Fatal(err)
			}
			clock := storetest.NewClock(time.Date(2026, 1, 31, 12, 0, 0, 0, ny))
			st := memstore.New(memstore.Options{Now: clock.Now})
			t.Cleanup(func() { st.Close() })
			e := rules.NewEngine(rc, st)
			e.Now = clock.Now
			g, err := gateway.New(cfg, gateway.Options{Engine: e, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			gw := httptest.NewServer(g)
			t.Cleanup(gw.Close)
			send := func(model string, estimate, in, out int) *http.Response {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, gw.URL+"/chat", strings.NewReader(`{"model":"`+model+`","messages":[]}`))
				req.Header.Set("X-Key", "k1")
				req.Header.Set("X-Estimate", strconv.Itoa(estimate))
				req.Header.Set("X-In", strconv.Itoa(in))
				req.Header.Set("X-Out", strconv.Itoa(out))
				resp, err := gw.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp
			}
			// 10 000 small tokens reserve at most $0.30 (the table's
			// highest, $30 a million, when the model comes with the
			// answer; $0.02 at small's output price when the body names
			// it); 100 000 in and 50 000 out of small cost $0.20.
			r := send("small", 10_000, 100_000, 50_000)
			want := map[string]string{"body:model": "0.98 USD", "answer:X-Model": "0.70 USD"}[model]
			if r.StatusCode != 200 || r.Header.Get(gateway.BudgetHeader) != want {
				t.Fatalf("first request: %d, budget %q; want 200 and %q", r.StatusCode, r.Header.Get(gateway.BudgetHeader), want)
			}
			// The next answer states what the first was settled at, less
			// its own reserve: one large token, $0.00003.
			r = send("large", 1, 10_000, 10_000) // $0.10 + $0.30
			if r.StatusCode != 200 || r.Header.Get(gateway.BudgetHeader) != "0.79997 USD" {
				t.Fatalf("second request: %d, budget %q; want 200 and 0.79997 USD", r.StatusCode, r.Header.Get(gateway.BudgetHeader))
			}
			r = send("small", 1, 1, 1) // reserves $0.000002 (small, or $0.00003 at the table's highest)
			want = map[string]string{"body:model": "0.399998 USD", "answer:X-Model": "0.39997 USD"}[model]
			if r.StatusCode != 200 || r.Header.Get(gateway.BudgetHeader) != want {
				t.Fatalf("third request: %d, budget %q; want %q", r.StatusCode, r.Header.Get(gateway.BudgetHeader), want)
			}
			r = send("large", 20_000, 1, 1) // reserves $0.60: more than is left
			if r.StatusCode != 429 || r.Header.Get(gateway.BudgetHeader) != "0.399997 USD" {
				t.Fatalf("a request whose reserve is over the budget: %d, budget %q; want 429 and 0.399997 USD", r.StatusCode, r.Header.Get(gateway.BudgetHeader))
			}
			renew := time.Date(2026, 2, 1, 0, 0, 0, 0, ny).Sub(clock.Now())
			if got := r.Header.Get("Retry-After"); got != strconv.Itoa(int(renew.Seconds())) {
				t.Errorf("Retry-After %q, want %d s, the month's end in New York", got, int(renew.Seconds()))
			}
			peek, err := e.Decide(t.Context(), rules.Request{Domain: "llm", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "x-key", Value: "k1"}, {Key: "kind", Value: "tokens"}}, Hits: new(uint64)}}})
			if err != nil || peek.Statuses[0].Remaining != 1_000_000-150_000-20_000-2 {
				t.Errorf("the token limit: %d left (%v), want the three requests' 170 002 tokens counted", peek.Statuses[0].Remaining, err)
			}
			clock.Set(time.Date(2026, 2, 1, 0, 0, 0, 0, ny))
			want = map[string]string{"body:model": "0.999998 USD", "answer:X-Model": "0.99997 USD"}[model]
			if r = send("small", 1, 1, 1); r.StatusCode != 200 || r.Header.Get(gateway.BudgetHeader) != want {
				t.Errorf("in February: %d, budget %q; want a full budget less its reserve, %q", r.StatusCode, r.Header.Get(gateway.BudgetHeader), want)
			}
		})
	}
}
