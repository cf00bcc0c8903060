package rules_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

// A quota bucket id, a map, finds the rule whose branch names its keys in
// some order, counted under the key of the RLS descriptor in that order.
func TestBucket(t *testing.T) {
	e, _ := newEngine(t, "testdata/envoy.yaml")
	tests := []struct {
		id    map[string]string
		found bool
		path  string
		rate  int64
		per   time.Duration
	}{
		{map[string]string{"user_id": "u"}, true, "user_id", 3, time.Minute},
		{map[string]string{"dest": "vip", "source": "proxy"}, true, "source_proxy.dest_vip", 4, time.Second},
		{map[string]string{"dest": "d", "source": "proxy"}, true, "source_proxy.dest", 2, time.Second},
		{map[string]string{"source": "proxy"}, false, "", 0, 0},
		{map[string]string{"dest": "d", "source": "proxy", "extra": "x"}, false, "", 0, 0},
		{map[string]string{"nothing": "x"}, false, "", 0, 0},
		{map[string]string{}, false, "", 0, 0},
	}
	for _, tt := range tests {
		b, found, err := e.Bucket("edge", tt.id)
		if err != nil || found != tt.found {
			t.Errorf("%v: found %v, %v; want %v", tt.id, found, err, tt.found)
			continue
		}
		if !found {
			continue
		}
		if b.Rule.Path != tt.path || b.Rate != tt.rate || b.Period != tt.per {
			t.Errorf("%v: rule %q %d per %v, want %q %d per %v", tt.id, b.Rule.Path, b.Rate, b.Period, tt.path, tt.rate, tt.per)
		}
		d := rules.Descriptor{Entries: b.Entries}
		if resp := decide(t, e, "edge", d); resp.Statuses[0].Key != b.Key {
			t.Errorf("%v: key %q, want the RLS descriptor's %q", tt.id, b.Key, resp.Statuses[0].Key)
		}
	}
	wide := map[string]string{}
	for i := range rules.MaxBucketEntries + 1 {
		wide[fmt.Sprint(i)] = "v"
	}
	if _, _, err := e.Bucket("edge", wide); err == nil {
		t.Errorf("a bucket id of %d entries: no error", len(wide))
	}
}

// A bucket id may carry the plan entry (Bouncer's format), which picks
// the plan's limits and is no part of the branch; a rule of several
// limits is shared by the tightest on average.
func TestBucketPlans(t *testing.T) {
	e, _ := newEngine(t, "../examples/serve/bouncer.yaml")
	for _, tt := range []struct {
		id   map[string]string
		rate int64
		per  time.Duration
	}{
		{map[string]string{"user_id": "u"}, 1000, 24 * time.Hour},
		{map[string]string{"plan": "pro", "user_id": "u"}, 100000, 24 * time.Hour},
	} {
		b, found, err := e.Bucket("api", tt.id)
		if err != nil || !found || b.Rate != tt.rate || b.Period != tt.per {
			t.Errorf("%v: found %v, %v, %d per %v; want %d per %v", tt.id, found, err, b.Rate, b.Period, tt.rate, tt.per)
		}
	}
}
