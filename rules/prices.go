package rules

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Micro is how many micro-units make one unit of a currency: a priced
// rule counts money in micro-units (a millionth of a dollar), so that a
// price or a budget with up to six decimals is a whole number.
const Micro = 1_000_000

// MaxPrice bounds a price, in micro-units per Prices.Per tokens: a
// million units of the currency.
const MaxPrice = 1_000_000 * Micro

// Prices is a price table: what a model's tokens cost, per kind, in
// micro-units of Currency per Per tokens. A rule that names it (its
// `price`) counts money: its limits are budgets, and a request's usage
// is charged to them at its model's prices. A Prices is read-only once
// loaded.
type Prices struct {
	Name     string
	Currency string // as the config writes it, such as USD
	Per      int64  // the tokens a price is for: 1 000 000 unless the config says
	Models   map[string]ModelPrices

	// Default is the model whose prices apply to usage that names no
	// model, or a model the table does not list; "" applies the highest
	// price of each kind across the table's models, so that an unknown
	// model is never charged less than a known one.
	Default string

	top   ModelPrices // the highest price of each kind
	meter int         // its charges' bouncer.Charge.Meter: 1 + its index in the domain
}

// NewPrices returns a price table for a program that builds its rules
// itself; a rules file's top-level prices make them. models maps a
// model's name to its prices, in micro-units per per tokens.
func NewPrices(name, currency string, per int64, def string, models map[string]ModelPrices) *Prices {
	p := &Prices{Name: name, Currency: currency, Per: per, Default: def, Models: models}
	for _, m := range models {
		p.top = ModelPrices{max(p.top.Input, m.Input), max(p.top.Output, m.Output), max(p.top.Cached, m.Cached)}
	}
	return p
}

// ModelPrices are one model's prices, in micro-units per Prices.Per
// tokens: input tokens, output tokens, and cached input tokens.
type ModelPrices struct {
	Input, Output, Cached int64
}

// Usage is what one request used: its model and its tokens of each kind.
type Usage struct {
	Model                 string
	Input, Output, Cached int64
}

// Units is u's tokens, all kinds together: what a rule that counts
// tokens, not money, is charged.
func (u Usage) Units() int64 {
	return min(max(u.Input, 0)+max(u.Output, 0)+max(u.Cached, 0), MaxHits)
}

// model returns the prices of model name.
func (p *Prices) model(name string) ModelPrices {
	if m, ok := p.Models[name]; ok {
		return m
	}
	if m, ok := p.Models[p.Default]; ok {
		return m
	}
	return p.top
}

// Cost is what u costs, in micro-units, rounded up to a whole micro-unit
// (a request is never charged less than its tokens cost) and at most
// MaxHits. The sum is exact: each count times its price is formed in 128
// bits before the one division.
func (p *Prices) Cost(u Usage) int64 {
	m := p.model(u.Model)
	var hi, lo uint64
	add := func(n, price int64) {
		if n <= 0 || price <= 0 {
			return
		}
		h, l := bits.Mul64(uint64(n), uint64(price))
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi += h + c
	}
	add(u.Input, m.Input)
	add(u.Output, m.Output)
	add(u.Cached, m.Cached)
	return p.divUp(hi, lo)
}

// Reserve is what an estimate of tokens reserves before the usage is
// known: every token at the model's highest price (the table's, for a
// model it does not list), rounded up, so that a request is never
// reserved less than it can cost.
func (p *Prices) Reserve(tokens int64, model string) int64 {
	m, ok := p.Models[model]
	if !ok {
		m = p.top
	}
	hi, lo := bits.Mul64(uint64(max(tokens, 0)), uint64(max(m.Input, m.Output, m.Cached)))
	return p.divUp(hi, lo)
}

// divUp is ⌈(hi, lo)/Per⌉, at most MaxHits.
func (p *Prices) divUp(hi, lo uint64) int64 {
	per := uint64(p.Per)
	if hi >= per {
		return MaxHits
	}
	q, r := bits.Div64(hi, lo, per)
	if r > 0 {
		q++
	}
	return int64(min(q, MaxHits))
}

// FormatMoney writes micro-units as a decimal amount of the currency,
// with at least two decimals and at most six: 49500000 is "49.50",
// 1234567 is "1.234567".
func FormatMoney(micro int64) string {
	sign := ""
	if micro < 0 {
		sign, micro = "-", -micro
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", micro%Micro), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s%d.%s", sign, micro/Micro, frac)
}

// ParseMoney reads a decimal amount of a currency ("50", "0.075",
// "1.234567") as micro-units: at most six decimals, not negative, at most
// max micro-units.
func ParseMoney(s string, max int64) (int64, error) {
	whole, frac, _ := strings.Cut(strings.TrimSpace(s), ".")
	if whole == "" && frac == "" {
		return 0, errors.New("want an amount such as 50 or 0.075")
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("%q has more than six decimals: amounts count millionths", s)
	}
	if strings.HasPrefix(whole, "-") || strings.HasPrefix(whole, "+") || strings.HasPrefix(frac, "-") || strings.HasPrefix(frac, "+") {
		return 0, fmt.Errorf("%q: want a positive amount", s)
	}
	w := int64(0)
	if whole != "" {
		var err error
		if w, err = strconv.ParseInt(whole, 10, 64); err != nil || w > max/Micro {
			return 0, fmt.Errorf("%q: want an amount from 0 to %s", s, FormatMoney(max))
		}
	}
	f := int64(0)
	if frac != "" {
		var err error
		if f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64); err != nil {
			return 0, fmt.Errorf("%q: want an amount such as 50 or 0.075", s)
		}
	}
	v := w*Micro + f
	if v > max {
		return 0, fmt.Errorf("%q: want an amount from 0 to %s", s, FormatMoney(max))
	}
	return v, nil
}
