package refsvc

import (
	"strings"
	"testing"
	"time"
)

func TestTail(t *testing.T) {
	tl := &tail{max: 8}
	for _, s := range []string{"abc", "defgh", "ijk"} {
		tl.Write([]byte(s))
	}
	if got, want := tl.String(), "defghijk"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Errorf("got ports %v, want 3 distinct ones", ports)
		}
		seen[p] = true
	}
}

func TestLimitConfig(t *testing.T) {
	got := LimitConfig("bench", "user_id", 1000, "second")
	for _, want := range []string{"domain: bench\n", "  - key: user_id\n", "      unit: second\n", "      requests_per_unit: 1000\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("LimitConfig: got\n%s\nwant a line %q", got, want)
		}
	}
	for unit, want := range map[string]time.Duration{"second": time.Second, "MINUTE": time.Minute, "hour": time.Hour, "day": 24 * time.Hour, "week": 0} {
		if got, ok := UnitPeriod(unit); got != want || ok != (want != 0) {
			t.Errorf("UnitPeriod(%q): got %v, %v, want %v, %v", unit, got, ok, want, want != 0)
		}
	}
}
