package rls

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer"
)

// A request that cannot be decided as given is the client's fault, whether
// the engine or the store below it found it so: one sentinel, one
// INVALID_ARGUMENT.
func TestStatusOfInvalidRequest(t *testing.T) {
	err := fmt.Errorf("settle: %w: a concurrency limit cannot be charged after the fact", bouncer.ErrInvalidRequest)
	if got := status.Code(statusOf(err)); got != codes.InvalidArgument {
		t.Errorf("got %v, want %v", got, codes.InvalidArgument)
	}
}
