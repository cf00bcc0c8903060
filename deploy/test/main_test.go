package deploytest

import (
	"testing"

	"go.uber.org/goleak"
)

// The gateway that validGateway builds starts health checks; Close must
// stop them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
