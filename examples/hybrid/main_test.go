package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/redistest"
)

// The example against the test Redis (scripts/redis-up.sh; make test
// starts it).
func TestHybrid(t *testing.T) {
	addr := redistest.Addr(t)
	var out strings.Builder
	if err := run(&out, addr, fmt.Sprintf("example-test-%d", time.Now().UnixNano())); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.HasPrefix(got, "an hour began") {
		t.Skip("an hour began while the example ran")
	}
	// Units a lease held when it ended (its life is a second, longer
	// than the example takes on any but a stalled machine) are not spent:
	// the count admitted is at most the limit, and all of it as a rule.
	var n int
	var first, third string
	if _, err := fmt.Sscanf(got, "600 checks of a limit of 100 an hour, on three instances\nadmitted: %d (never more than the limit: true)\n", &n); err != nil {
		t.Fatalf("output %q: %v", got, err)
	}
	lines := strings.Split(got, "\n")
	first, third = lines[0], lines[2]
	if n < 1 || n > 100 || first != "600 checks of a limit of 100 an hour, on three instances" || third != "calls to Redis: fewer than one in ten checks: true" {
		t.Errorf("got\n%s", got)
	}
	if n != 100 {
		t.Logf("admitted %d of 100: a lease ended with units in it", n)
	}
}
