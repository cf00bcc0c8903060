package httpretry

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPacerMemory checks the pacer's bounds: hosts beyond maxHosts, and
// quotas of one host beyond maxQuotas, forget the least recently updated.
func TestPacerMemory(t *testing.T) {
	var p pacer
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	spent := http.Header{"Ratelimit": {`"default";r=0;t=60`}}
	for i := range 3 * maxHosts {
		p.observe(fmt.Sprintf("host%d:443", i), spent, false, time.Time{}, now.Add(time.Duration(i)*time.Millisecond))
	}
	if got := len(p.hosts); got != maxHosts {
		t.Errorf("got %d hosts, want %d", got, maxHosts)
	}
	later := now.Add(time.Second)
	for _, tc := range []struct {
		host string
		wait bool
	}{
		{"host0:443", false},
		{fmt.Sprintf("host%d:443", 2*maxHosts-1), false},
		{fmt.Sprintf("host%d:443", 2*maxHosts), true},
		{fmt.Sprintf("host%d:443", 3*maxHosts-1), true},
	} {
		if got := p.take(tc.host, later) > 0; got != tc.wait {
			t.Errorf("%s: got wait %v, want %v", tc.host, got, tc.wait)
		}
	}

	items := make([]string, 2*maxQuotas)
	for i := range items {
		items[i] = fmt.Sprintf(`"q%d";r=5;t=60`, i)
	}
	p.observe("many", http.Header{"Ratelimit": {strings.Join(items, ", ")}}, false, time.Time{}, now)
	if got := len(p.hosts["many"].quotas); got != maxQuotas {
		t.Errorf("got %d quotas of one host, want %d", got, maxQuotas)
	}
}
