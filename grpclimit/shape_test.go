package grpclimit_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/grpclimit"
	"github.com/bouncerhq/bouncer/memstore"
)

// A shaping leaky bucket holds a call for its Delay, then serves it; one
// that would wait past MaxDelay is refused with the excess as its retry
// delay; a client that goes away while held is never served. The
// interceptor is called directly, in a bubble whose clock the store
// reads.
func TestShapingHoldsCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.Options{Now: time.Now}) // the bubble's clock
		defer s.Close()
		shape := bouncer.Limit{Name: "q", Algorithm: bouncer.LeakyBucket, Rate: 10, Period: time.Second, Burst: 20, Shape: true}
		in, err := grpclimit.New(s, []grpclimit.Rule{{Name: "shaped", Limits: []bouncer.Limit{shape}}}, grpclimit.Options{MaxDelay: 150 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var served []time.Duration
		info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Get"}
		handler := func(context.Context, any) (any, error) {
			served = append(served, time.Since(start))
			return "ok", nil
		}
		call := func(ctx context.Context) error {
			_, err := in.Unary(ctx, nil, info, handler)
			return err
		}
		// One call every 100 ms: each waits for the one before it.
		for i := range 3 {
			if err := call(context.Background()); err != nil {
				t.Fatalf("call %d: %v, want served", i, err)
			}
		}
		for i, at := range served {
			if want := time.Duration(i) * 100 * time.Millisecond; at != want {
				t.Errorf("call %d served at %v, want %v", i, at, want)
			}
		}
		// With one call held for 100 ms, the next would wait 200, past
		// MaxDelay.
		held := make(chan error)
		go func() { held <- call(context.Background()) }()
		synctest.Wait()
		err = call(context.Background())
		st, _ := status.FromError(err)
		if st.Code() != codes.ResourceExhausted || len(st.Details()) == 0 {
			t.Fatalf("call past MaxDelay: %v, want ResourceExhausted with details", err)
		}
		if retry, ok := st.Details()[0].(*errdetails.RetryInfo); !ok || retry.RetryDelay.AsDuration() != 50*time.Millisecond {
			t.Fatalf("call past MaxDelay: details %v, want a RetryInfo of 50ms (200 less MaxDelay)", st.Details())
		}
		if err := <-held; err != nil || served[len(served)-1] != 300*time.Millisecond {
			t.Fatalf("held call: %v, served at %v, want served at 300ms", err, served[len(served)-1])
		}
		// A client that goes away while held is not served.
		ctx, cancel := context.WithCancel(context.Background())
		go func() { held <- call(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-held; status.Code(err) != codes.Canceled || len(served) != 4 {
			t.Fatalf("cancelled while held: %v, served %d, want Canceled and 4 served", err, len(served))
		}
	})
}
