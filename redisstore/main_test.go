package redisstore_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// rueidis's Cluster client closes the connections a topology refresh
// replaced five seconds later, and runs a refresh it delayed after an
// error (about half a second later), in goroutines of their own that
// outlive the client by design. The TLS servers and Sentinel sets the
// tests started stop at the end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		goleak.Cleanup(func(code int) {
			stopTLSServers()
			stopTLSSentinels()
			os.Exit(code)
		}))
}
