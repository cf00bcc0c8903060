package auth

import (
	"testing"

	"go.uber.org/goleak"
)

// The JWKS refreshers are goroutines: every test that starts one must
// have stopped it by the end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
