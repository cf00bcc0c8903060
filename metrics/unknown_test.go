package metrics_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/metrics"
	"github.com/bouncerhq/bouncer/rules"
)

// Requests for a domain the config lacks are counted in one series with
// no label, whatever the domain, answered OK or rejected; a request that
// fails as invalid, or names a defined domain, is not.
func TestUnknownDomainRequests(t *testing.T) {
	c, err := rules.Parse("edge.yaml", []byte(`domain: edge
descriptors:
  - key: zone
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: dest
    rate_limit: {name: per_dest, unit: minute, requests_per_unit: 5}
  - key: dest
    value: vip
    rate_limit: {unit: minute, requests_per_unit: 5, replaces: [{name: per_dest}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		reject      bool
		domain      string
		descriptors []rules.Descriptor
		wantUnknown float64
		wantErr     error
	}{
		{"defined", false, "edge", []rules.Descriptor{{Entries: []rules.Entry{{Key: "zone", Value: "a"}}}}, 0, nil},
		{"wrong case", false, "Edge", []rules.Descriptor{{Entries: []rules.Entry{{Key: "zone", Value: "a"}}}}, 1, nil},
		{"wrong case, rejected", true, "Edge", []rules.Descriptor{{Entries: []rules.Entry{{Key: "zone", Value: "a"}}}}, 1, rules.ErrUnknownDomain},
		{"unknown and invalid", false, "nowhere", nil, 0, bouncer.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			st := memstore.New(memstore.Options{})
			t.Cleanup(func() { st.Close() })
			e := rules.NewEngine(c, st)
			e.RejectUnknownDomains = tt.reject
			e.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			e.Observe = m.Observe
			for range 3 {
				_, err := e.Decide(context.Background(), rules.Request{Domain: tt.domain, Descriptors: tt.descriptors})
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Decide: got %v, want %v", err, tt.wantErr)
				}
			}
			if got, want := value(t, reg, "bouncer_unknown_domain_requests_total"), 3*tt.wantUnknown; got != want {
				t.Errorf("bouncer_unknown_domain_requests_total: got %v, want %v", got, want)
			}
			if got := series(t, reg, "bouncer_unknown_domain_requests_total"); got != 1 {
				t.Errorf("bouncer_unknown_domain_requests_total: got %d series, want 1", got)
			}
		})
	}

	// A replaced rule's descriptor is counted as replaced, under its rule:
	// its name, or its descriptor path when it has none.
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	e.Observe = m.Observe
	_, err = e.Decide(context.Background(), rules.Request{Domain: "edge", Descriptors: []rules.Descriptor{
		{Entries: []rules.Entry{{Key: "dest", Value: "vip"}}},
		{Entries: []rules.Entry{{Key: "dest", Value: "x"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ rule, result string }{{"dest_vip", "ok"}, {"per_dest", "replaced"}} {
		if got := value(t, reg, "bouncer_decisions_total", "domain=edge", "rule="+tt.rule, "result="+tt.result); got != 1 {
			t.Errorf("bouncer_decisions_total{rule=%q,result=%q}: got %v, want 1", tt.rule, tt.result, got)
		}
	}
}
