package rlqs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/storetest"
)

// rawStream opens a stream on cc, cancelled when the test ends.
func openStream(t *testing.T, cc *grpc.ClientConn) pb.RateLimitQuotaService_StreamRateLimitQuotasClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := pb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ask sends a report of ids on s and returns the buckets assigned in its
// answer, or the stream's error.
func ask(t *testing.T, s pb.RateLimitQuotaService_StreamRateLimitQuotasClient, domain string, ids ...map[string]string) (int, error) {
	t.Helper()
	msg := &pb.RateLimitQuotaUsageReports{Domain: domain}
	for _, id := range ids {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &pb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &pb.BucketId{Bucket: id}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 1,
		})
	}
	if err := s.Send(msg); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		return 0, err
	}
	if len(resp.GetBucketAction()) != len(ids) {
		t.Fatalf("%d buckets reported, %d actions answered", len(ids), len(resp.GetBucketAction()))
	}
	n := 0
	for i, a := range resp.GetBucketAction() {
		switch {
		case a.GetQuotaAssignmentAction() != nil:
			n++
		case a.GetAbandonAction() == nil:
			t.Fatalf("action %d: neither assigned nor abandoned", i)
		}
	}
	return n, nil
}

// end closes s and waits until the server has ended it, and so given
// back what it held.
func end(t *testing.T, s pb.RateLimitQuotaService_StreamRateLimitQuotasClient) {
	t.Helper()
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the stream ended with %v, want io.EOF", err)
			}
			return
		}
	}
}

// internal is the id of the mixed config's unlimited bucket i; every
// one holds as many bytes of id.
func internal(i int) map[string]string { return map[string]string{"internal": fmt.Sprintf("%04d", i)} }

// idBytes is what one internal bucket holds of its id, measured.
func idBytes(t *testing.T) int {
	t.Helper()
	clock := storetest.NewClock(start)
	srv := &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now}
	if n, err := ask(t, openStream(t, serve(t, srv)), "mix", internal(0)); n != 1 || err != nil {
		t.Fatalf("one bucket: %d assigned, %v", n, err)
	}
	return int(srv.Stats().IDBytes)
}

// A connection opens MaxConnStreams streams and no more: the next is
// refused with RESOURCE_EXHAUSTED naming the bound, while another
// connection opens its own; one stream ended, its place is free again.
func TestMaxConnStreams(t *testing.T) {
	clock := storetest.NewClock(start)
	srv := &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now, MaxConnStreams: 3}
	cc, other := serve(t, srv), serveConn(t, srv)
	var open []pb.RateLimitQuotaService_StreamRateLimitQuotasClient
	for i := range 3 {
		s := openStream(t, cc)
		if _, err := ask(t, s, "mix", internal(i)); err != nil {
			t.Fatalf("stream %d of 3: %v", i+1, err)
		}
		open = append(open, s)
	}
	_, err := ask(t, openStream(t, cc), "mix", internal(3))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "MaxConnStreams") {
		t.Errorf("stream 4 of 3: %v, want RESOURCE_EXHAUSTED naming MaxConnStreams", err)
	}
	if n, err := ask(t, openStream(t, other), "mix", internal(4)); n != 1 || err != nil {
		t.Errorf("another connection's stream: %d assigned, %v; want 1, nil", n, err)
	}
	end(t, open[0])
	if n, err := ask(t, openStream(t, cc), "mix", internal(5)); n != 1 || err != nil {
		t.Errorf("a stream once one of 3 ended: %d assigned, %v; want 1, nil", n, err)
	}
	if got := srv.Stats(); got.RefusedStreams != 1 || got.Streams != 4 {
		t.Errorf("Stats: %d streams refused, %d open; want 1, 4", got.RefusedStreams, got.Streams)
	}
}

// Each bound on the buckets held admits its last bucket and abandons
// the next, counts it, and gives its room back when the streams end.
func TestBucketBounds(t *testing.T) {
	per := idBytes(t)
	type step struct{ conn, stream, assigned int } // each reports 2 new buckets
	cases := []struct {
		name  string
		bound func(*rlqs.Server)
		steps []step
		over  func(rlqs.Stats) uint64
	}{
		{"MaxBuckets", func(s *rlqs.Server) { s.MaxBuckets = 3 }, []step{{0, 0, 2}, {0, 0, 1}, {0, 1, 2}},
			func(s rlqs.Stats) uint64 { return s.OverBuckets }},
		{"MaxSubscriptions", func(s *rlqs.Server) { s.MaxSubscriptions = 3 }, []step{{0, 0, 2}, {1, 0, 1}},
			func(s rlqs.Stats) uint64 { return s.OverSubscriptions }},
		{"MaxConnIDBytes", func(s *rlqs.Server) { s.MaxConnIDBytes = 3 * per }, []step{{0, 0, 2}, {0, 1, 1}, {1, 0, 2}},
			func(s rlqs.Stats) uint64 { return s.OverConnIDBytes }},
		{"MaxIDBytes", func(s *rlqs.Server) { s.MaxIDBytes = 3 * per }, []step{{0, 0, 2}, {1, 0, 1}},
			func(s rlqs.Stats) uint64 { return s.OverIDBytes }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := storetest.NewClock(start)
			srv := &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now}
			c.bound(srv)
			conns := []*grpc.ClientConn{serveConn(t, srv), serveConn(t, srv)}
			streams := map[[2]int]pb.RateLimitQuotaService_StreamRateLimitQuotasClient{}
			for i, st := range c.steps {
				s := streams[[2]int{st.conn, st.stream}]
				if s == nil {
					s = openStream(t, conns[st.conn])
					streams[[2]int{st.conn, st.stream}] = s
				}
				n, err := ask(t, s, "mix", internal(2*i), internal(2*i+1))
				if n != st.assigned || err != nil {
					t.Fatalf("report %d (connection %d, stream %d): %d of 2 buckets assigned (%v), want %d", i, st.conn, st.stream, n, err, st.assigned)
				}
			}
			if got := c.over(srv.Stats()); got != 1 {
				t.Errorf("counted past %s: %d, want 1", c.name, got)
			}
			for _, s := range streams {
				end(t, s)
			}
			if got := srv.Stats(); got.Subscriptions != 0 || got.IDBytes != 0 {
				t.Errorf("every stream ended: %d subscriptions, %d bytes of ids held; want 0, 0", got.Subscriptions, got.IDBytes)
			}
			if n, err := ask(t, openStream(t, conns[0]), "mix", internal(100), internal(101)); n != 2 || err != nil {
				t.Errorf("after the streams ended: %d of 2 buckets assigned (%v), want 2", n, err)
			}
		})
	}
}

// liveHeap is the heap in use after two collections (the second frees
// what the first left in sync.Pools' victim caches).
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// The attack of one connection that opens more streams than allowed,
// each reporting as many buckets as allowed, with ids as long as
// allowed (8 entries of 4 KiB): its streams past MaxConnStreams are
// refused with RESOURCE_EXHAUSTED, its buckets past MaxConnIDBytes are
// abandoned, the live heap it adds (its streams still open) stays
// within a connection's bound (docs/rlqs.md: MaxConnStreams ×
// MaxBuckets × 1.2 KB + MaxConnIDBytes) plus the gRPC transport's
// buffers, and another connection is still served.
func TestHostileConnection(t *testing.T) {
	const streams, buckets, batch, idBytes = 4, 200, 20, 256 << 10
	clock := storetest.NewClock(start)
	srv := &rlqs.Server{Engine: engine(t, rlqs.DeepConfig, clock), Now: clock.Now,
		MaxConnStreams: streams, MaxBuckets: buckets, MaxConnIDBytes: idBytes}
	hostile, honest := serve(t, srv), serveConn(t, srv)
	before := liveHeap()
	assigned := 0
	for i := range streams + 2 {
		s := openStream(t, hostile)
		for j := 0; j < buckets; j += batch {
			ids := make([]map[string]string, batch)
			for k := range ids {
				ids[k] = rlqs.HostileID(i*buckets + j + k)
			}
			n, err := ask(t, s, "bench", ids...)
			if i >= streams {
				if status.Code(err) != codes.ResourceExhausted {
					t.Errorf("stream %d of %d: %v, want RESOURCE_EXHAUSTED", i+1, streams, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("stream %d: %v", i+1, err)
			}
			assigned += n
		}
	}
	grown := liveHeap() - before
	t.Logf("the hostile connection added %d bytes of live heap, holding %d buckets", grown, srv.Stats().Subscriptions)
	const transport = 4 << 20
	if bound := int64(streams*buckets*1200 + idBytes + transport); grown > bound {
		t.Errorf("the hostile connection added %d bytes of live heap, want at most %d", grown, bound)
	}
	st := srv.Stats()
	if st.RefusedStreams != 2 || st.IDBytes > idBytes || int64(assigned) != st.Subscriptions || assigned == 0 || st.OverConnIDBytes != uint64(streams*buckets-assigned) {
		t.Errorf("Stats %+v, %d buckets assigned: want 2 streams refused, at most %d bytes of ids held by the buckets assigned, the %d others past MaxConnIDBytes",
			st, assigned, idBytes, streams*buckets-assigned)
	}
	c := client(t, honest, rlqs.ClientOptions{Domain: "bench", Now: clock.Now})
	id := map[string]string{"k0": "a", "k1": "b", "k2": "c", "k3": "d", "k4": "e", "k5": "f", "k6": "g", "k7": "h"}
	c.Allow(id)
	syncAll(t, c)
	if r := rlqs.Rate(c.Assignment(id)); r != 100 {
		t.Errorf("an honest connection beside the hostile one: assigned %v a second, want the rule's 100", r)
	}
}
