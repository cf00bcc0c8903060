package rules_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/rules"
)

// A limit given with the request that no store can count is the caller's
// mistake: Decide rejects it as an invalid request, never as a store
// failure.
func TestOverrideOutOfRange(t *testing.T) {
	tests := []struct {
		name    string
		rate    uint32
		unit    rules.Unit
		wantErr bool
	}{
		{"ten per hour", 10, rules.UnitHour, false},
		{"zero admits nothing", 0, rules.UnitSecond, false},
		{"the uint32 maximum per minute", math.MaxUint32, rules.UnitMinute, false},
		{"a billion per second", 1e9, rules.UnitSecond, true},
		{"the uint32 maximum per second", math.MaxUint32, rules.UnitSecond, true},
	}
	configs := []struct{ path, domain string }{
		{"testdata/envoy.yaml", "edge"},
		{"testdata/native.yaml", "api"},
	}
	for _, c := range configs {
		for _, tt := range tests {
			t.Run(c.domain+"/"+tt.name, func(t *testing.T) {
				e, _ := newEngine(t, c.path)
				d := desc("user_id=o")
				d.Limit = &rules.Override{RequestsPerUnit: tt.rate, Unit: tt.unit}
				_, err := e.Decide(t.Context(), rules.Request{Domain: c.domain, Descriptors: ds(d)})
				if tt.wantErr && !errors.Is(err, rules.ErrInvalidRequest) {
					t.Errorf("got error %v, want one wrapping ErrInvalidRequest", err)
				}
				if !tt.wantErr && err != nil {
					t.Errorf("got error %v, want none", err)
				}
			})
		}
	}
}

// An override the store cannot count (one over a month, for this store) is the
// caller's mistake: an invalid request, not a store failure.
func TestOverrideTheStoreCannotCount(t *testing.T) {
	e, _ := newEngine(t, "testdata/envoy.yaml")
	e.Supports = func(l bouncer.Limit) error {
		if l.Period > 30*24*time.Hour {
			return errors.New("too long for this store")
		}
		return nil
	}
	year := desc("user_id=y")
	year.Limit = &rules.Override{RequestsPerUnit: 5, Unit: rules.UnitYear}
	_, err := e.Decide(t.Context(), rules.Request{Domain: "edge", Descriptors: ds(year)})
	if !errors.Is(err, rules.ErrInvalidRequest) || !strings.Contains(err.Error(), "too long for this store") {
		t.Errorf("got %v, want ErrInvalidRequest naming the store's reason", err)
	}
	day := desc("user_id=y")
	day.Limit = &rules.Override{RequestsPerUnit: 5, Unit: rules.UnitDay}
	if got := codes(decide(t, e, "edge", day)); got != "OK: OK/4" {
		t.Errorf("a day override: got %q, want OK/4", got)
	}
}
