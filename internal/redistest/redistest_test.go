package redistest

import (
	"fmt"
	"testing"
)

// fakeT records what a test helper did to its test.
type fakeT struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeT) Helper() {}

func (f *fakeT) Skipf(string, ...any) { f.skipped = true; panic(f) }

func (f *fakeT) Fatalf(string, ...any) { f.failed = true; panic(f) }

// call runs get on a fakeT, which stops at a skip or a failure as
// testing's would.
func call(get func(testing.TB) any) (f *fakeT, got any) {
	f = &fakeT{}
	defer func() {
		if r := recover(); r != nil && r != f {
			panic(r)
		}
	}()
	return f, get(f)
}

func TestAddrs(t *testing.T) {
	addr := func(t testing.TB) any { return Addr(t) }
	cluster := func(t testing.TB) any { return ClusterAddrs(t) }
	sentinel := func(t testing.TB) any { return SentinelSet(t) }
	sentinelEnv := map[string]string{
		"BOUNCER_REDIS_SENTINEL_ADDRS": "h:1,h:2", "BOUNCER_REDIS_SENTINEL_MASTER_SET": "m",
		"BOUNCER_REDIS_SENTINEL_USER": "su", "BOUNCER_REDIS_SENTINEL_PASSWORD": "sp",
		"BOUNCER_REDIS_SENTINEL_MASTER_USER": "mu", "BOUNCER_REDIS_SENTINEL_MASTER_PASSWORD": "mp",
	}
	partial := map[string]string{"BOUNCER_REQUIRE_REDIS": "1"}
	for k, v := range sentinelEnv {
		if k != "BOUNCER_REDIS_SENTINEL_PASSWORD" {
			partial[k] = v
		}
	}
	for _, tt := range []struct {
		name          string
		env           map[string]string
		get           func(testing.TB) any
		want          string
		skip, failing bool
	}{
		{"set", map[string]string{"BOUNCER_REDIS_ADDR": "h:1"}, addr, "h:1", false, false},
		{"unset skips", nil, addr, "", true, false},
		{"unset fails when required", map[string]string{"BOUNCER_REQUIRE_REDIS": "1"}, addr, "", false, true},
		{"cluster", map[string]string{"BOUNCER_REDIS_CLUSTER_ADDRS": "h:1,h:2"}, cluster, "[h:1 h:2]", false, false},
		{"cluster unset fails when required", map[string]string{"BOUNCER_REQUIRE_REDIS": "1"}, cluster, "", false, true},
		{"sentinel", sentinelEnv, sentinel, "{[h:1 h:2] m su sp mu mp}", false, false},
		{"sentinel unset skips", nil, sentinel, "", true, false},
		{"sentinel without its password fails when required", partial, sentinel, "", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, env := range []string{"BOUNCER_REDIS_ADDR", "BOUNCER_REDIS_CLUSTER_ADDRS", "BOUNCER_REQUIRE_REDIS"} {
				t.Setenv(env, tt.env[env])
			}
			for env := range sentinelEnv {
				t.Setenv(env, tt.env[env])
			}
			f, got := call(tt.get)
			if f.skipped != tt.skip || f.failed != tt.failing {
				t.Fatalf("skipped %v, failed %v; want %v, %v", f.skipped, f.failed, tt.skip, tt.failing)
			}
			if !tt.skip && !tt.failing && fmt.Sprint(got) != tt.want {
				t.Errorf("got %v, want %s", got, tt.want)
			}
		})
	}
}
