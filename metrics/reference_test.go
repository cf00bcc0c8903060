package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/metrics"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

const referenceConfig = `domain: app
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: source
    value: proxy
    descriptors:
      - key: dest
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: canary
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`

// The reference metrics count hits (hits_addend), split as
// envoyproxy/ratelimit splits them, under its names and labels: key1 and
// key2 are the first two parts of the rule's descriptor path.
func TestReferenceCountsHits(t *testing.T) {
	c, err := rules.Parse("app.yaml", []byte(referenceConfig))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Start)
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	e.Now = clock.Now
	reg := prometheus.NewRegistry()
	ref := metrics.NewReference(reg)
	e.Observe = ref.Observe

	type counts struct{ total, within, near, over, shadow float64 }
	user := []string{"domain=app", "key1=user", "key2="}
	steps := []struct {
		name    string
		entries []rules.Entry
		hits    uint64
		labels  []string
		want    counts // the totals after the step
	}{
		{"5 hits pass", []rules.Entry{{Key: "user", Value: "a"}}, 5, user, counts{total: 5, within: 5}},
		{"4 pass, 1 of them past 80%", []rules.Entry{{Key: "user", Value: "a"}}, 4, user, counts{total: 9, within: 9, near: 1}},
		{"1 passes, near", []rules.Entry{{Key: "user", Value: "a"}}, 1, user, counts{total: 10, within: 10, near: 2}},
		{"3 denied: over", []rules.Entry{{Key: "user", Value: "a"}}, 3, user, counts{total: 13, within: 10, near: 2, over: 3}},
		{"nested: key2", []rules.Entry{{Key: "source", Value: "proxy"}, {Key: "dest", Value: "x"}}, 3,
			[]string{"domain=app", "key1=source_proxy", "key2=dest"}, counts{total: 3, over: 3}},
		{"shadow: over and shadow_mode", []rules.Entry{{Key: "canary", Value: "x"}}, 2,
			[]string{"domain=app", "key1=canary", "key2="}, counts{total: 2, over: 2, shadow: 2}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			_, err := e.Decide(context.Background(), rules.Request{Domain: "app", HitsAddend: s.hits,
				Descriptors: []rules.Descriptor{{Entries: s.entries}}})
			if err != nil {
				t.Fatal(err)
			}
			got := counts{
				value(t, reg, "ratelimit_service_rate_limit_total_hits", s.labels...),
				value(t, reg, "ratelimit_service_rate_limit_within_limit", s.labels...),
				value(t, reg, "ratelimit_service_rate_limit_near_limit", s.labels...),
				value(t, reg, "ratelimit_service_rate_limit_over_limit", s.labels...),
				value(t, reg, "ratelimit_service_rate_limit_shadow_mode", s.labels...),
			}
			if got != s.want {
				t.Errorf("got %+v, want %+v", got, s.want)
			}
		})
	}

	// Unlimited rules are not counted; errors are, by type.
	if _, err := e.Decide(context.Background(), rules.Request{Domain: "app", HitsAddend: 7,
		Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "free", Value: "x"}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "ratelimit_service_rate_limit_total_hits"); got != 3 {
		t.Errorf("total_hits: got %d series, want 3 (none for the unlimited rule)", got)
	}
	ref.Observe("app", nil, errors.New("redis down"))
	ref.Observe("app", nil, bouncer.ErrInvalidRequest)
	for _, kind := range []string{"redis_error", "service_error"} {
		if got := value(t, reg, "ratelimit_service_should_rate_limit_error", "err_type="+kind); got != 1 {
			t.Errorf("should_rate_limit_error{err_type=%s}: got %v, want 1", kind, got)
		}
	}
	ref.Loaded(c, true, nil)
	ref.Loaded(c, false, errors.New("bad file"))
	if ok, bad := value(t, reg, "ratelimit_service_config_load_success"), value(t, reg, "ratelimit_service_config_load_error"); ok != 1 || bad != 1 {
		t.Errorf("config loads: got %v success, %v error, want 1 and 1", ok, bad)
	}
}

// BenchmarkObserve measures what counting one decided descriptor costs,
// with Bouncer's metrics alone and with envoyproxy/ratelimit's names too
// (--reference-metrics).
func BenchmarkObserve(b *testing.B) {
	c, err := rules.Parse("app.yaml", []byte(referenceConfig))
	if err != nil {
		b.Fatal(err)
	}
	rule := c.Domain("app").Rules[1] // source_proxy.dest: two levels
	resp := &rules.Response{Statuses: []rules.Status{{Code: rules.OK, Rule: rule, Limit: &rules.CurrentLimit{RequestsPerUnit: 100}, Remaining: 50, Hits: 1}}}
	for _, withRef := range []bool{false, true} {
		b.Run(fmt.Sprintf("reference=%v", withRef), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			var ref *metrics.Reference
			if withRef {
				ref = metrics.NewReference(reg)
			}
			b.ReportAllocs()
			for b.Loop() {
				m.Observe("app", resp, nil)
				if ref != nil {
					ref.Observe("app", resp, nil)
				}
			}
		})
	}
}
