package rules_test

import (
	"context"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/bouncerhq/bouncer/rules"
)

// Cost rounds up, never down: the cost times Per is at least the exact
// price of the usage, and less than one micro-unit above it; Reserve is
// never below Cost for the same tokens of one kind.
func TestPricesCostRoundsUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		price := func(label string) int64 {
			return rapid.OneOf(rapid.Int64Range(0, 100), rapid.Int64Range(0, rules.MaxPrice)).Draw(t, label)
		}
		p := rules.NewPrices("t", "USD", rapid.OneOf(rapid.Just(int64(1_000_000)), rapid.Int64Range(1, rules.MaxHits)).Draw(t, "per"), "",
			map[string]rules.ModelPrices{"m": {Input: price("input"), Output: price("output"), Cached: price("cached")}})
		u := rules.Usage{Model: "m", Input: rapid.Int64Range(0, rules.MaxHits).Draw(t, "in"), Output: rapid.Int64Range(0, rules.MaxHits).Draw(t, "out"), Cached: rapid.Int64Range(0, rules.MaxHits).Draw(t, "cached")}
		m := p.Models["m"]
		exact := new(big.Int)
		for _, k := range [][2]int64{{u.Input, m.Input}, {u.Output, m.Output}, {u.Cached, m.Cached}} {
			exact.Add(exact, new(big.Int).Mul(big.NewInt(k[0]), big.NewInt(k[1])))
		}
		got := p.Cost(u)
		charged := new(big.Int).Mul(big.NewInt(got), big.NewInt(p.Per))
		if got < rules.MaxHits {
			if charged.Cmp(exact) < 0 {
				t.Fatalf("Cost(%+v) = %d µ: %v < %v, undercharged", u, got, charged, exact)
			}
			if charged.Sub(charged, big.NewInt(p.Per)).Cmp(exact) >= 0 {
				t.Fatalf("Cost(%+v) = %d µ: a micro-unit more than it costs", u, got)
			}
		} else if exact.Cmp(new(big.Int).Mul(big.NewInt(rules.MaxHits-1), big.NewInt(p.Per))) <= 0 {
			t.Fatalf("Cost(%+v) = MaxHits for %v", u, exact)
		}
		for _, n := range []int64{u.Input, u.Output, u.Cached} {
			if r, c := p.Reserve(n, "m"), p.Cost(rules.Usage{Model: "m", Input: n}); r < c {
				t.Fatalf("Reserve(%d) = %d below its input cost %d", n, r, c)
			}
		}
	})
}

// Prices and budgets from a rules file: a budget counts micro-units of
// the table's currency, and a model's tokens cost its prices; a model the
// table does not list is charged the highest of each kind.
func TestPricedRule(t *testing.T) {
	e, _ := newEngine(t, "testdata/prices.yaml")
	d := e.Config().Domain("llm")
	r := d.Rules[0]
	if r.Prices == nil || r.Prices.Currency != "USD" || r.Limits[0].Rate != 50*rules.Micro || r.Limits[0].Name != "50_USD_per_calendar_month" {
		t.Fatalf("the priced rule: %+v, limits %v", r.Prices, r.Limits)
	}
	p := r.Prices
	for _, c := range []struct {
		u    rules.Usage
		want int64 // µ$
	}{
		{rules.Usage{Model: "small", Input: 1_000_000}, 150_000},
		{rules.Usage{Model: "small", Input: 1000, Output: 500, Cached: 3}, 150 + 300 + 1}, // 0.225 µ$ of cached rounds up to 1
		{rules.Usage{Model: "large", Input: 1000, Output: 500}, 3000 + 7500},
		{rules.Usage{Model: "huge", Input: 1000, Output: 500}, 3000 + 7500},
		{rules.Usage{Model: "small"}, 0},
	} {
		if got := p.Cost(c.u); got != c.want {
			t.Errorf("Cost(%+v) = %d µ$, want %d", c.u, got, c.want)
		}
	}
	if got := p.Reserve(1000, "small"); got != 600 {
		t.Errorf("Reserve(1000 small) = %d µ$, want 600 (at the output price)", got)
	}
	if got := p.Reserve(1000, ""); got != 15000 {
		t.Errorf("Reserve(1000, no model) = %d µ$, want 15000 (the table's highest)", got)
	}
}

// A report of usage charges a priced rule's budget in money and a
// token rule in tokens, and each status says what is left: the budget's
// in money.
func TestReportUsage(t *testing.T) {
	e, _ := newEngine(t, "testdata/prices.yaml")
	u := rules.Usage{Model: "large", Input: 20_000, Output: 10_000} // $0.06 + $0.15
	resp, err := e.Report(context.Background(), rules.Request{Domain: "llm", Usage: &u, Descriptors: []rules.Descriptor{desc("api_key=a"), desc("api_key=a", "kind=tokens")}})
	if err != nil {
		t.Fatal(err)
	}
	b := resp.Statuses[0].Budget
	if b.Currency != "USD" || b.Remaining != 49_790_000 || b.Limit != 50_000_000 {
		t.Fatalf("the budget after $0.21: %+v, want 49.79 of 50.00 USD left", b)
	}
	if got := rules.FormatMoney(b.Remaining); got != "49.79" {
		t.Errorf("FormatMoney = %q", got)
	}
	if st := resp.Statuses[1]; st.Budget.Currency != "" || st.Remaining != 0 || resp.Code != rules.OverLimit {
		t.Errorf("the token limit after 30 000 tokens: %+v, code %v; want in debt, over the limit", st, resp.Code)
	}
}

// A decision reserves a priced rule's estimate at the model's highest
// price; its ledger's charge carries the table's meter, and settling it
// at the usage's cost gives the rest back.
func TestPricedSettle(t *testing.T) {
	e, _ := newEngine(t, "testdata/prices.yaml")
	req := rules.Request{Domain: "llm", HitsAddend: 10_000, Model: "small", Descriptors: []rules.Descriptor{desc("api_key=b")}}
	decide(t, e, "llm", hits(desc("api_key=b"), 10_000)) // no model: at the table's highest, $15 a million
	resp, err := e.Decide(context.Background(), req)
	if err != nil || resp.Code != rules.OK {
		t.Fatalf("Decide: %v %v", resp.Code, err)
	}
	if b := resp.Statuses[0].Budget; b.Remaining != 50_000_000-150_000-6000 {
		t.Fatalf("after a second reserve of 10 000 small tokens at $0.60 a million: %+v", b)
	}
	l := resp.Ledger()
	var meters []int
	err = l.Settle(context.Background(), func(meter int) (int64, bool) {
		meters = append(meters, meter)
		p := resp.Prices(meter)
		if p == nil {
			t.Fatalf("meter %d has no prices", meter)
		}
		return p.Cost(rules.Usage{Model: "small", Input: 2000, Output: 1000}), true // 300 + 600 µ$
	})
	if err != nil || len(meters) != 1 {
		t.Fatalf("Settle: %v, meters %v", err, meters)
	}
	after := decide(t, e, "llm", rules.Descriptor{Entries: desc("api_key=b").Entries, Hits: new(uint64)})
	if b := after.Statuses[0].Budget; b.Remaining != 50_000_000-150_000-900 {
		t.Errorf("after settling at $0.0009: %+v, want %d left", b, 50_000_000-150_000-900)
	}
}

func TestPricesConfigErrors(t *testing.T) {
	for name, c := range map[string]struct{ yaml, want string }{
		"no currency":        {"domain: d\nprices:\n  p:\n    models: {m: {input: 1}}\nrules:\n  - {name: r, match: [{key: a}], price: p, limits: [{budget: 5, period: 1d}]}\n", "prices.p.currency: required"},
		"seven decimals":     {"domain: d\nprices:\n  p:\n    currency: USD\n    models: {m: {input: 0.0000001}}\nrules:\n  - {name: r, match: [{key: a}], price: p, limits: [{budget: 5, period: 1d}]}\n", "prices.p.models.m.input: \"0.0000001\" has more than six decimals"},
		"negative price":     {"domain: d\nprices:\n  p:\n    currency: USD\n    models: {m: {output: -1}}\nrules:\n  - {name: r, match: [{key: a}], price: p, limits: [{budget: 5, period: 1d}]}\n", "prices.p.models.m.output: \"-1\": want a positive amount"},
		"unknown table":      {"domain: d\nrules:\n  - {name: r, match: [{key: a}], price: p, limits: [{budget: 5, period: 1d}]}\n", `rules[0].price: no price table "p"`},
		"rate in a priced":   {"domain: d\nprices:\n  p:\n    currency: USD\n    models: {m: {input: 1}}\nrules:\n  - {name: r, match: [{key: a}], price: p, limits: [{rate: 5, period: 1d}]}\n", "rules[0].limits[0]: a rule with a price counts money"},
		"budget unpriced":    {"domain: d\nrules:\n  - {name: r, match: [{key: a}], limits: [{budget: 5, period: 1d}]}\n", "rules[0].limits[0].budget: only a rule with a price"},
		"both":               {"domain: d\nrules:\n  - {name: r, match: [{key: a}], limits: [{budget: 5, rate: 5, period: 1d}]}\n", "a limit has a rate or a budget, not both"},
		"budget too precise": {"domain: d\nrules:\n  - {name: r, match: [{key: a}], limits: [{budget: 5.0000001, period: 1d}]}\n", "rules[0].limits[0].budget: \"5.0000001\" has more than six decimals"},
		"unknown default":    {"domain: d\nprices:\n  p:\n    currency: USD\n    default: x\n    models: {m: {input: 1}}\nrules:\n  - {name: r, match: [{key: a}], price: p, limits: [{budget: 5, period: 1d}]}\n", `prices.p.default: "x" is not one of its models`},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			write(t, path, c.yaml)
			_, err := rules.Load(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestMoney(t *testing.T) {
	for micro, want := range map[int64]string{0: "0.00", 50_000_000: "50.00", 49_500_000: "49.50", 1_234_567: "1.234567", 75_000: "0.075", -1_500_000: "-1.50"} {
		if got := rules.FormatMoney(micro); got != want {
			t.Errorf("FormatMoney(%d) = %q, want %q", micro, got, want)
		}
	}
	for s, want := range map[string]int64{"50": 50_000_000, "0.075": 75_000, "1.234567": 1_234_567, ".5": 500_000, "3.": 3_000_000} {
		if got, err := rules.ParseMoney(s, rules.MaxPrice); err != nil || got != want {
			t.Errorf("ParseMoney(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", ".", "-1", "1.0000001", "x", "1e3", "1000001"} {
		if got, err := rules.ParseMoney(s, rules.MaxPrice); err == nil {
			t.Errorf("ParseMoney(%q) = %d, want an error", s, got)
		}
	}
}

// A new config's prices apply to what is settled from then on; a
// request decided under the old config settles at its prices.
func TestPricesReload(t *testing.T) {
	e, _ := newEngine(t, "testdata/prices.yaml")
	req := rules.Request{Domain: "llm", HitsAddend: 1000, Model: "small", Descriptors: []rules.Descriptor{desc("api_key=r")}}
	before, err := e.Decide(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	dearer, err := rules.Parse("prices.yaml", []byte(strings.Replace(mustRead(t, "testdata/prices.yaml"), "small: {input: 0.15,", "small: {input: 1.15,", 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(dearer)
	u := rules.Usage{Model: "small", Input: 1_000_000}
	settled := int64(0)
	before.Ledger().Settle(context.Background(), func(m int) (int64, bool) {
		settled = before.Prices(m).Cost(u)
		return settled, true
	})
	if settled != 150_000 {
		t.Errorf("a request decided before the reload settles at %d µ$, want the old price, 150000", settled)
	}
	after, err := e.Report(context.Background(), rules.Request{Domain: "llm", Usage: &u, Descriptors: []rules.Descriptor{desc("api_key=s")}})
	if err != nil {
		t.Fatal(err)
	}
	if b := after.Statuses[0].Budget; b.Remaining != 50_000_000-1_150_000 {
		t.Errorf("a report after the reload: %d µ$ left, want the new price charged", b.Remaining)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
