package rules_test

import (
	"errors"
	"math"
	"testing"

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
				if tt.wantErr && !errors.Is(err, bouncer.ErrInvalidRequest) {
					t.Errorf("got error %v, want one wrapping ErrInvalidRequest", err)
				}
				if !tt.wantErr && err != nil {
					t.Errorf("got error %v, want none", err)
				}
			})
		}
	}
}
