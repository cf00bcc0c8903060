package bench

import (
	"errors"
	"testing"
)

var errDenied = errors.New("bench: denied")

// TestImplementations checks that every implementation is configured as
// intended: smallSpec admits three checks per key and denies the fourth,
// and the implementation holds state for exactly the keys it checked.
func TestImplementations(t *testing.T) {
	for _, im := range impls {
		t.Run("impl="+im.name, func(t *testing.T) {
			l := im.new(smallSpec)
			defer l.close()
			for i, want := range []bool{true, true, true, false} {
				got, err := l.allow("user:1")
				if err != nil || got != want {
					t.Fatalf("check %d: got %v, %v, want %v, <nil>", i+1, got, err, want)
				}
			}
			if err := l.warm("user:2"); err != nil {
				t.Fatalf("warm: got %v, want <nil>", err)
			}
			for key, want := range map[string]bool{"user:1": true, "user:2": true, "user:3": false} {
				if got := l.held(key); got != want {
					t.Errorf("held(%q): got %v, want %v", key, got, want)
				}
			}
			if got := l.count(); got != -1 && got != 2 {
				t.Errorf("count: got %d, want 2", got)
			}
		})
	}
}
