package rules_test

import (
	"context"
	"fmt"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

func Example() {
	config, err := rules.Parse("api.yaml", []byte(`
domain: api
rules:
  - name: per_user
    match: [{key: user_id}]
    limits:
      - {name: per_second, rate: 2, period: 1s, burst: 2}
      - {name: per_day, rate: 1000, period: 1d, algorithm: fixed_window}
`))
	if err != nil {
		fmt.Println(err) // every problem, as file:line: reason
		return
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine := rules.NewEngine(config, store)

	req := rules.Request{Domain: "api", Descriptors: []rules.Descriptor{
		{Entries: []rules.Entry{{Key: "user_id", Value: "alice"}}},
	}}
	for range 3 {
		resp, err := engine.Decide(context.Background(), req)
		if err != nil {
			fmt.Println(err) // an invalid request, or the store failed
			return
		}
		st := resp.Statuses[0]
		fmt.Println(resp.Code, st.Limit.Name, st.Remaining)
	}
	// Output:
	// OK per_second 1
	// OK per_second 0
	// OVER_LIMIT per_second 0
}

func ExampleParse_errors() {
	_, err := rules.Parse("api.yaml", []byte(`
domain: api
descriptors:
  - key: user_id
    rate_limit:
      unit: fortnight
      requests_per_unit: 10
`))
	fmt.Println(err)
	// Output:
	// rules: invalid config:
	// api.yaml:6: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'; want second, minute, hour, day, week, month or year
}

// A caller that sees how requests end, such as the gateway, holds each
// request for its Delay, gives the units of refund_on_5xx rules back when
// the upstream fails, and releases leases when the request ends.
func ExampleResponse_Ledger() {
	config, err := rules.LoadOptions{AllowConcurrency: true}.Parse("gateway.yaml", []byte(`
domain: gateway
rules:
  - name: per_user
    match: [{key: user_id}]
    refund_on_5xx: true
    limits:
      - {name: in_flight, rate: 1, period: 30s, algorithm: concurrency}
      - {name: per_minute, rate: 1, period: 1m, algorithm: fixed_window}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine := rules.NewEngine(config, store)
	ctx := context.Background()
	req := rules.Request{Domain: "gateway", Descriptors: []rules.Descriptor{
		{Entries: []rules.Entry{{Key: "user_id", Value: "alice"}}},
	}}

	resp, _ := engine.Decide(ctx, req)
	fmt.Println(resp.Code, resp.Delay()) // wait resp.Delay(), then proxy

	busy, _ := engine.Decide(ctx, req) // meanwhile: one in flight already
	fmt.Println(busy.Code)
	_ = busy.Ledger().End(ctx, bouncer.Unserved) // it ends at once: nothing was charged

	// The upstream answers 503, and the request ends: its units and its
	// lease go back.
	_ = resp.Ledger().End(context.WithoutCancel(ctx), bouncer.Failed)

	again, _ := engine.Decide(ctx, req)
	fmt.Println(again.Code)
	// Output:
	// OK 0s
	// OVER_LIMIT
	// OK
}
