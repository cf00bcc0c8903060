package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example's minute: after two reports the proxies hold their fair
// shares (4, 4 and 2 a second of 10: the smallest gets what it asks, the
// two others split the rest) and admit exactly that.
func TestFleet(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 14 {
		t.Fatalf("got %d lines, want 14:\n%s", len(lines), out.String())
	}
	for _, l := range lines[3:] { // from the second report on
		if f := strings.Fields(l); len(f) != 7 || f[1] != "4.00" || f[2] != "4.00" || f[3] != "2.00" {
			t.Errorf("assigned: %q, want 4.00 4.00 2.00", l)
		}
	}
	for _, l := range lines[5:] { // admitted, once the new buckets' bursts are spent
		if f := strings.Fields(l); len(f) != 7 || f[4] != "20" || f[5] != "20" || f[6] != "10" {
			t.Errorf("admitted: %q, want 20 20 10", l)
		}
	}
}
