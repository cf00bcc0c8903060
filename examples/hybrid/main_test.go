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
	want := `600 checks of a limit of 100 an hour, on three instances
admitted: 100 (never more than the limit: true)
calls to Redis: fewer than one in ten checks: true
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
