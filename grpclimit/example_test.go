package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/grpclimit"
	"github.com/bouncerhq/bouncer/memstore"
)

// Each client address may make 2 calls a minute; a verified user (set by
// an authentication interceptor with bouncer.WithUser) 100 an hour on
// top. The limited method here is the health service's Check, so health
// checks are not excluded.
func ExampleNew() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	limit, err := grpclimit.New(store, []grpclimit.Rule{
		{Name: "per_peer", Key: grpclimit.Peer(nil), Limits: []bouncer.Limit{
			{Name: "minute", Algorithm: bouncer.TokenBucket, Rate: 2, Period: time.Minute, Burst: 2},
		}},
		{Name: "per_user", Key: grpclimit.User(), Limits: []bouncer.Limit{
			{Name: "hour", Algorithm: bouncer.GCRA, Rate: 100, Period: time.Hour, Burst: 10},
		}},
	}, grpclimit.Options{})
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(limit.Unary), grpc.StreamInterceptor(limit.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	for range 3 {
		var hdr, trl metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
		st := status.Convert(err)
		if err == nil {
			fmt.Println(st.Code(), hdr.Get("ratelimit"))
			continue
		}
		for _, d := range st.Details() {
			if r, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Println(st.Code(), trl.Get("ratelimit"), trl.Get("retry-after"), r.RetryDelay.AsDuration().Round(time.Second))
			}
		}
	}
	// Output:
	// OK ["per_peer";r=1;t=30]
	// OK ["per_peer";r=0;t=60]
	// ResourceExhausted ["per_peer";r=0;t=60] [30] 30s
}
