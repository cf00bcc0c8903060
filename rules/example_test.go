package rules_test

import (
	"context"
	"fmt"

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
	// api.yaml:6: invalid rate limit unit 'fortnight'
}
