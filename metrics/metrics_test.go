package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/metrics"
	"github.com/bouncerhq/bouncer/rules"
)

// value gathers reg and returns the value of the series of name with
// exactly labels ("k=v" each): a counter's or gauge's value, a histogram's
// sample count; 0 if there is no such series.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(labels))
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var got []string
			for _, lp := range m.GetLabel() {
				got = append(got, lp.GetName()+"="+lp.GetValue())
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// series counts the series of name.
func series(t *testing.T, reg prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

func TestObserveResults(t *testing.T) {
	rule := &rules.Rule{Path: "user"}
	limit := &rules.CurrentLimit{RequestsPerUnit: 10}
	tests := []struct {
		name       string
		st         rules.Status
		wantRule   string
		wantResult string
	}{
		{"allowed", rules.Status{Code: rules.OK, Rule: rule, Limit: limit, Remaining: 5}, "user", "ok"},
		{"over the limit", rules.Status{Code: rules.OverLimit, Rule: rule, Limit: limit}, "user", "over_limit"},
		{"shadowed", rules.Status{Code: rules.OK, Rule: rule, Limit: limit, Shadowed: true}, "user", "shadowed"},
		{"unlimited", rules.Status{Code: rules.OK, Rule: rule, Unlimited: true}, "user", "unlimited"},
		{"degraded", rules.Status{Code: rules.OK, Rule: rule, Limit: limit, Degraded: true}, "user", "degraded"},
		{"degraded and denied", rules.Status{Code: rules.OverLimit, Rule: rule, Limit: limit, Degraded: true}, "user", "degraded"},
		{"no rule", rules.Status{Code: rules.OK}, "", "no_rule"},
		{"replaced", rules.Status{Code: rules.OK, Rule: rule}, "user", "replaced"},
		{"a limit given with the request", rules.Status{Code: rules.OK, Limit: limit, Remaining: 5}, "", "ok"},
		{"a named rule", rules.Status{Code: rules.OverLimit, Rule: &rules.Rule{Path: "user_id", Name: "per_user"}, Limit: limit}, "per_user", "over_limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			m.Observe("d", &rules.Response{Statuses: []rules.Status{tt.st, tt.st}}, nil)
			if got := value(t, reg, "bouncer_decisions_total", "domain=d", "rule="+tt.wantRule, "result="+tt.wantResult); got != 2 {
				t.Errorf("bouncer_decisions_total{rule=%q,result=%q}: got %v, want 2", tt.wantRule, tt.wantResult, got)
			}
			if got := series(t, reg, "bouncer_decisions_total"); got != 1 {
				t.Errorf("got %d series, want 1", got)
			}
			wantDenied := 0.0
			if tt.name == "degraded and denied" {
				wantDenied = 2
			}
			if got := value(t, reg, "bouncer_degraded_denied_total", "domain=d", "rule="+tt.wantRule); got != wantDenied {
				t.Errorf("bouncer_degraded_denied_total: got %v, want %v", got, wantDenied)
			}
		})
	}
}

func TestObserveNearLimit(t *testing.T) {
	rule := &rules.Rule{Path: "user"}
	limit := &rules.CurrentLimit{RequestsPerUnit: 10}
	tests := []struct {
		remaining uint32
		code      rules.Code
		want      float64
	}{
		{9, rules.OK, 0},
		{2, rules.OK, 0}, // 80% used: not past the ratio
		{1, rules.OK, 1},
		{0, rules.OK, 1},
		{0, rules.OverLimit, 0}, // counted as over, not near
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v with %d of 10 left", tt.code, tt.remaining), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			m.Observe("d", &rules.Response{Statuses: []rules.Status{{Code: tt.code, Rule: rule, Limit: limit, Remaining: tt.remaining}}}, nil)
			if got := value(t, reg, "bouncer_near_limit_total", "domain=d", "rule=user"); got != tt.want {
				t.Errorf("bouncer_near_limit_total: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestObserveErrors(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: no descriptors", bouncer.ErrInvalidRequest), "invalid_request"},
		{fmt.Errorf("%w: %q", rules.ErrUnknownDomain, "x"), "unknown_domain"},
		{errors.New("redis: connection refused"), "store"},
		{context.DeadlineExceeded, "store"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			m.Observe("d", &rules.Response{}, tt.err)
			if got := value(t, reg, "bouncer_request_errors_total", "reason="+tt.want); got != 1 {
				t.Errorf("bouncer_request_errors_total{reason=%q}: got %v, want 1", tt.want, got)
			}
			if got := series(t, reg, "bouncer_decisions_total"); got != 0 {
				t.Errorf("a failed request counted %d decision series, want none", got)
			}
		})
	}
}

func TestReloaded(t *testing.T) {
	parse := func(s string) *rules.Config {
		c, err := rules.Parse("c.yaml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	one := parse("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	two := parse("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.Serving(one)
	m.Reloaded(two, true, nil)
	m.Reloaded(two, false, nil)
	m.Reloaded(two, false, nil)
	m.Reloaded(two, false, errors.New("bad"))
	for result, want := range map[string]float64{"success": 1, "unchanged": 2, "failure": 1} {
		if got := value(t, reg, "bouncer_config_reloads_total", "result="+result); got != want {
			t.Errorf("bouncer_config_reloads_total{result=%q}: got %v, want %v", result, got, want)
		}
	}
	if got := value(t, reg, "bouncer_config_info", "version="+two.Version); got != 1 {
		t.Errorf("bouncer_config_info of the served version: got %v, want 1", got)
	}
	if got := series(t, reg, "bouncer_config_info"); got != 1 {
		t.Errorf("bouncer_config_info: got %d series, want only the served version's", got)
	}
}

type store struct {
	err      error
	refunded int
}

func (s *store) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{Allowed: s.err == nil}, s.err
}

func (s *store) Refund(context.Context, bouncer.Request) error {
	s.refunded++
	return s.err
}

func TestLimiter(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	ok, failing := &store{}, &store{err: errors.New("down")}
	for range 3 {
		if d, err := m.Limiter(ok).Check(t.Context(), bouncer.Request{}); err != nil || !d.Allowed {
			t.Fatalf("got %+v, %v; want the store's answer", d, err)
		}
	}
	if _, err := m.Limiter(failing).Check(t.Context(), bouncer.Request{}); err == nil {
		t.Fatal("got no error, want the store's")
	}
	if err := m.Limiter(ok).Refund(t.Context(), bouncer.Request{}); err != nil || ok.refunded != 1 {
		t.Errorf("Refund: got %v and %d refunds, want it passed to the store", err, ok.refunded)
	}
	for outcome, want := range map[string]float64{"ok": 3, "error": 1} {
		if got := value(t, reg, "bouncer_store_check_seconds", "outcome="+outcome); got != want {
			t.Errorf("bouncer_store_check_seconds{outcome=%q}: got %v samples, want %v", outcome, got, want)
		}
	}
}

func TestGaugeFunc(t *testing.T) {
	reg := prometheus.NewRegistry()
	v := 0.5
	metrics.GaugeFunc(reg, "test_state", "A state.", func() float64 { return v })
	if got := value(t, reg, "test_state"); got != 0.5 {
		t.Errorf("got %v, want 0.5", got)
	}
	v = 1
	if got := value(t, reg, "test_state"); got != 1 {
		t.Errorf("after a change: got %v, want 1 (read at every scrape)", got)
	}
}
