package main

import (
	"strings"
	"testing"
	"time"
)

func TestQuickstart(t *testing.T) {
	noon := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	if err := run(&out, func() time.Time { return noon }); err != nil {
		t.Fatal(err)
	}
	want := `alice allowed: 2 left under per-second
alice allowed: 1 left under per-second
alice allowed: 0 left under per-second
alice denied by per-second: retry in 200ms
bob   allowed: 2 left under per-second
`
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
