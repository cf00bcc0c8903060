package jsonapi

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/rules"
)

// A request that cannot be decided as given is the client's fault, whether
// the engine or the store below it found it so: one sentinel, one 400.
func TestStatusOfInvalidRequest(t *testing.T) {
	for name, err := range map[string]error{
		"the engine's": &rules.EmptyRequestError{},
		"the store's":  fmt.Errorf("settle: %w: a concurrency limit cannot be charged after the fact", bouncer.ErrInvalidRequest),
	} {
		if status, code := statusOf(err); status != http.StatusBadRequest || code != "invalid_request" {
			t.Errorf("%s: got %d %s, want 400 invalid_request", name, status, code)
		}
	}
}
