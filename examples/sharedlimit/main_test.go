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
func TestSharedLimit(t *testing.T) {
	addr := redistest.Addr(t)
	var out strings.Builder
	if err := run(&out, addr, fmt.Sprintf("example-test-%d", time.Now().UnixNano())); err != nil {
		t.Fatal(err)
	}
	want := `instance 1: allowed (redis), 4 left
instance 2: allowed (redis), 3 left
instance 1: allowed (redis), 2 left
instance 2: allowed (redis), 1 left
instance 1: allowed (redis), 0 left
instance 2: denied (redis), retry in 12s
instance 1: denied (redis), retry in 12s
no redis  : allowed (local), 4 left
no redis  : allowed (local), 3 left
no redis  : allowed (local), 2 left
no redis  : allowed (local), 1 left
no redis  : allowed (local), 0 left
no redis  : denied (local), retry in 12s
`
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
