package header_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The writers' test starts servers, stores and a gateway: each must be
// gone when it ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
