package rlqs_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// rueidis runs a refresh it delayed after an error (about half a second
// later), and its Cluster client closes the connections a topology
// refresh replaced five seconds later, in goroutines that outlive the
// client by design (as in redisstore's tests).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"))
}

// start is 10 s into a minute, so that the first window is not a whole
// one; every test's clock starts there.
var start = time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)

// serve serves s on a loopback listener until the test ends, and returns
// a connection to it. opts are the gRPC server's.
func serve(t testing.TB, s *rlqs.Server, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	return serveConn(t, s, opts...)
}

// serveConn is serve, for a listener and connection of their own each
// call.
func serveConn(t testing.TB, s *rlqs.Server, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	s.Register(g)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(l) }()
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		g.Stop()
		<-done
	})
	return cc
}

// engine is an engine of the config body on a memory store on clock.
func engine(t testing.TB, body string, clock *storetest.Clock) *rules.Engine {
	t.Helper()
	cfg, err := rules.Parse("rlqs.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	return newEngine(cfg, st, clock)
}

func newEngine(cfg *rules.Config, lim bouncer.Limiter, clock *storetest.Clock) *rules.Engine {
	e := rules.NewEngine(cfg, lim)
	e.Now = clock.Now
	return e
}

// client opens a client of domain on cc, closed when the test ends.
func client(t *testing.T, cc *grpc.ClientConn, o rlqs.ClientOptions) *rlqs.Client {
	t.Helper()
	c, err := rlqs.NewClient(context.Background(), cc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func syncAll(t *testing.T, cs ...*rlqs.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range cs {
		if err := c.Sync(ctx); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
}
