package redisstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// rueidis's Cluster client closes the connections a topology refresh
// replaced five seconds later, in a goroutine of its own that outlives
// the client by design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"))
}
