package main

import (
	"fmt"
	"regexp"
	"strconv"
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
	// The count of calls to Redis depends on how leases are sized; the
	// line prints it, and it is below a tenth of the checks.
	calls := regexp.MustCompile(`(?m)^calls to Redis: (\d+) leases taken for 600 checks \(fewer than one in ten: true\)$`).FindStringSubmatch(got)
	if calls == nil {
		t.Fatalf("no count of calls to Redis, below 60, in\n%s", got)
	}
	if n, _ := strconv.Atoi(calls[1]); n < 1 || n >= 60 {
		t.Errorf("calls to Redis: got %d, want 1 to 59", n)
	}
	want := `600 checks of a limit of 100 an hour, on three instances
admitted: 100 (never more than the limit: true)
` + calls[0] + "\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
