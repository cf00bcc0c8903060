package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bouncerhq/bouncer/internal/redistest"
)

// The six instances and their eighteen stores stop every goroutine they
// start when the example ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example against the test Redis (scripts/redis-up.sh; make test
// starts it): every second after the first admits at most 1.1 times the
// limit in all, the region with most of the demand admits the most, and
// the first instance hears from every region.
func TestRegions(t *testing.T) {
	addr := redistest.Addr(t)
	var out strings.Builder
	if err := run(&out, addr, fmt.Sprintf("example-test-%d", time.Now().UnixNano())); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	rows := regexp.MustCompile(`(?m)^ +(\d) +(even|mostly ap|mostly eu|mostly us) +(\d+) +(\d+) +(\d+) +(\d+) +\d\.\d\d  (.*)$`).FindAllStringSubmatch(got, -1)
	heard := regexp.MustCompile(`^ap \d+, eu \d+ \(\d+ms old\), us \d+ \(\d+ms old\)$`)
	if len(rows) != len(seconds) {
		t.Fatalf("got %d rows of a second, want %d, in\n%s", len(rows), len(seconds), got)
	}
	for s, row := range rows {
		var n [4]int
		for i := range n {
			n[i], _ = strconv.Atoi(row[3+i])
		}
		if n[0]+n[1]+n[2] != n[3] {
			t.Errorf("second %d: ap %d + eu %d + us %d, want all %d", s+1, n[0], n[1], n[2], n[3])
		}
		if s > 0 && float64(n[3]) > 1.1*float64(global.Rate) {
			t.Errorf("second %d: admitted %d in all, over 1.1 × %d", s+1, n[3], global.Rate)
		}
		if !heard.MatchString(row[7]) {
			t.Errorf("second %d: ap's first instance knew %q, want every region's count and how old the news of eu and us was", s+1, row[7])
		}
		if r := strings.TrimPrefix(row[2], "mostly "); r != row[2] {
			most := map[string]int{"ap": 0, "eu": 1, "us": 2}[r]
			if n[most] <= n[(most+1)%3] || n[most] <= n[(most+2)%3] {
				t.Errorf("second %d, demand mostly in %s: admitted %v, want %s the most", s+1, r, n[:3], r)
			}
		}
	}
	for _, line := range []string{"every second after the first within 1.1 × the limit: true", "degraded decisions: 0"} {
		if !strings.Contains(got, "\n"+line+"\n") {
			t.Errorf("no line %q in\n%s", line, got)
		}
	}
	t.Log("\n" + got)
}
