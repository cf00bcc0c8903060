package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bouncerhq/bouncer/internal/storekey"
	"github.com/bouncerhq/bouncer/rules"
)

// Defaults of the Server's options.
const (
	// DefaultInterval is how often Envoy's filter reports (fixed there
	// at 5 s today, whatever its reporting_interval).
	DefaultInterval = 5 * time.Second
	// DefaultMaxBuckets bounds the buckets of one stream.
	DefaultMaxBuckets = 1000
	// DefaultBurst is how many seconds of its share a token bucket
	// assignment holds.
	DefaultBurst = time.Second
)

// Server implements Envoy's rate limit quota service (RLQS,
// envoy.service.rate_limit_quota.v3) over a rules.Engine: clients report
// their buckets' usage on a stream, and each bucket's rule's rate is
// divided among the clients that report it, by their demand, into token
// bucket assignments that the clients enforce themselves. A client is a
// connection: the streams of one divide one share. A bucket is divided
// once an interval, and the assignments in force never add up to more
// than its rate (docs/rlqs.md). It is safe for concurrent use; the zero
// value of every field but Engine is usable.
type Server struct {
	pb.UnimplementedRateLimitQuotaServiceServer

	// Engine finds each bucket's rule (rules.Engine.Bucket), and counts
	// the requests clients report as allowed in its store, where RLS
	// checks of the same descriptors see them. Required.
	Engine *rules.Engine

	// Demands is where every client's demand for every bucket is kept;
	// servers sharing a store share it so that they divide a limit
	// alike. Nil keeps them in this server (NewLocalDemands).
	Demands Demands

	// Interval is how often clients report (DefaultInterval when 0),
	// and how often a bucket is divided anew. An assignment lives three
	// intervals: a client that stops reporting gives its share back
	// after that. Servers sharing Demands must have the same.
	Interval time.Duration

	// Burst is how long a share a token bucket holds (DefaultBurst
	// when 0).
	Burst time.Duration

	// MaxBuckets bounds the buckets a stream may report
	// (DefaultMaxBuckets when 0): past it, a new bucket is answered
	// with abandon_action.
	MaxBuckets int

	// MaxConnStreams bounds the streams one client connection holds
	// open at once (DefaultMaxConnStreams when 0): past it, a new stream
	// is refused with RESOURCE_EXHAUSTED. Envoy reports every bucket of
	// a filter config on one stream.
	MaxConnStreams int

	// MaxSubscriptions bounds the buckets all streams hold in all
	// (DefaultMaxSubscriptions when 0): past it, a new bucket is
	// answered with abandon_action.
	MaxSubscriptions int

	// MaxConnIDBytes and MaxIDBytes bound the bytes of bucket ids held
	// by the streams of one connection, and by all streams
	// (DefaultMaxConnIDBytes, DefaultMaxIDBytes when 0). A bucket's id
	// is held as its name and store key, whose long entries are
	// digests (storekey.Join). Past either bound, a new bucket is
	// answered with abandon_action.
	MaxConnIDBytes, MaxIDBytes int

	// Now is the clock (time.Now when nil). Log receives the store
	// errors (slog.Default when nil).
	Now func() time.Time
	Log *slog.Logger

	once    sync.Once     // sets what follows, at the first use (init)
	demands Demands       // Demands, or this server's own
	id      string        // this server's random id, for its streams' (clientID)
	stop    chan struct{} // closed by Shutdown
	stream  atomic.Uint64

	divMu     sync.Mutex           // guards divisions
	divisions map[string]*division // by bucket key, while a stream holds it

	streams, subs                atomic.Int64
	reports, abandoned, unshared atomic.Uint64
	bounds                       // what each connection holds (bounds.go)
}

// Stats is what a Server has served, for its metrics.
type Stats struct {
	Streams       int64  // streams open
	Subscriptions int64  // buckets the open streams hold
	Reports       uint64 // bucket reports answered
	Abandoned     uint64 // of them, answered with abandon_action
	Unshared      uint64 // of them, divided among this server's clients only: Demands failed

	IDBytes        int64  // bytes of bucket ids the open streams hold
	RefusedStreams uint64 // streams refused: their connection had MaxConnStreams open
	// Reports of a bucket not held yet answered with abandon_action
	// (counted in Abandoned too) because a bound was reached:
	// MaxBuckets, MaxSubscriptions, MaxConnIDBytes, MaxIDBytes.
	OverBuckets, OverSubscriptions, OverConnIDBytes, OverIDBytes uint64
}

// Stats returns what s has served so far.
func (s *Server) Stats() Stats {
	return Stats{
		Streams: s.streams.Load(), Subscriptions: s.subs.Load(),
		Reports: s.reports.Load(), Abandoned: s.abandoned.Load(), Unshared: s.unshared.Load(),
		IDBytes: s.idBytes.Load(), RefusedStreams: s.refusedStreams.Load(),
		OverBuckets: s.overBuckets.Load(), OverSubscriptions: s.overSubs.Load(),
		OverConnIDBytes: s.overConnIDBytes.Load(), OverIDBytes: s.overIDBytes.Load(),
	}
}

// Shutdown ends every stream, now and to come, with UNAVAILABLE: its
// client reconnects to another server (a stream never ends of itself,
// so a graceful stop of the gRPC server waits for it otherwise).
func (s *Server) Shutdown() {
	s.once.Do(s.init)
	close(s.stop)
}

// init sets what a Server makes for itself, once.
func (s *Server) init() {
	s.stop = make(chan struct{})
	s.demands = s.Demands
	if s.demands == nil {
		s.demands = NewLocalDemands(s.now)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	s.id = hex.EncodeToString(b[:])
	s.divisions = map[string]*division{}
}

// Register registers s on g.
func (s *Server) Register(g *grpc.Server) { pb.RegisterRateLimitQuotaServiceServer(g, s) }

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) interval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	return DefaultInterval
}

// TTL is how long an assignment lives: three report intervals.
func (s *Server) TTL() time.Duration { return 3 * s.interval() }

func (s *Server) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// clientID names a new stream uniquely among every server sharing
// Demands: a random id of this server, and the stream's number.
func (s *Server) clientID() string {
	return s.id + "-" + strconv.FormatUint(s.stream.Add(1), 10)
}

// peerID names the client a stream divides a limit as, among every
// server sharing Demands: its connection to this server (peerName), or
// the stream itself if it has none.
func (st *stream) peerID() string {
	if st.peer == "" {
		return st.client
	}
	return st.s.id + "/" + st.peer
}

// subscription is what a stream holds of one of its buckets.
type subscription struct {
	bucket rules.Bucket
	config *rules.Config // the config bucket was found in
	found  bool
	idle   time.Duration // reported with no request, in a row
	seen   time.Time     // when it was last reported, on the server's clock
	m      *member       // its part in its bucket's division
	rate   float64       // the share last assigned, per second
	last   *typepb.RateLimitStrategy
	held   int64 // bytes of its id held (stream.hold)
}

// stream is one client's stream.
type stream struct {
	s      *Server
	conn   *connHold
	client string
	peer   string // peerName of its context
	domain string
	subs   map[string]*subscription
}

// StreamRateLimitQuotas serves one client: the first report binds the
// domain, and each report is answered at once with an action for each of
// its buckets.
func (s *Server) StreamRateLimitQuotas(g pb.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	s.once.Do(s.init)
	st, err := s.open(peerName(g.Context()))
	if err != nil {
		return err
	}
	defer st.close()
	defer st.forget()
	msgs, errc := make(chan *pb.RateLimitQuotaUsageReports), make(chan error, 1)
	go func() {
		for {
			msg, err := g.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- msg:
			case <-g.Context().Done():
				return
			}
		}
	}()
	for {
		var msg *pb.RateLimitQuotaUsageReports
		select {
		case msg = <-msgs:
		case err := <-errc:
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		case <-s.stop:
			return status.Error(codes.Unavailable, "the server is shutting down")
		case <-g.Context().Done():
			return status.FromContextError(g.Context().Err()).Err()
		}
		switch {
		case st.domain == "" && msg.GetDomain() == "":
			return status.Error(codes.InvalidArgument, "the stream's first report must name a domain")
		case st.domain == "":
			st.domain = msg.GetDomain()
		case msg.GetDomain() != "" && msg.GetDomain() != st.domain:
			return status.Errorf(codes.InvalidArgument, "a stream serves one domain: %q, not %q", st.domain, msg.GetDomain())
		}
		if err := g.Send(st.answer(g.Context(), msg)); err != nil {
			return err
		}
	}
}

// answer is the response to one report.
func (st *stream) answer(ctx context.Context, msg *pb.RateLimitQuotaUsageReports) *pb.RateLimitQuotaResponse {
	resp := &pb.RateLimitQuotaResponse{BucketAction: make([]*pb.RateLimitQuotaResponse_BucketAction, 0, len(msg.GetBucketQuotaUsages()))}
	// Each report's store work ends within an interval, the client's
	// next report, whatever the store does.
	ctx, cancel := context.WithTimeout(ctx, st.s.interval())
	defer cancel()
	for _, u := range msg.GetBucketQuotaUsages() {
		id := u.GetBucketId()
		strategy := st.report(ctx, u)
		action := &pb.RateLimitQuotaResponse_BucketAction{BucketId: id}
		st.s.reports.Add(1)
		if strategy == nil {
			st.s.abandoned.Add(1)
			action.BucketAction = &pb.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &pb.RateLimitQuotaResponse_BucketAction_AbandonAction{}}
		} else {
			action.BucketAction = &pb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: &pb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(st.s.TTL()),
				RateLimitStrategy:    strategy,
			}}
		}
		resp.BucketAction = append(resp.BucketAction, action)
	}
	return resp
}

// report takes one bucket's usage and returns its assignment, or nil to
// abandon it: no rule matches it (any more), the stream has too many
// buckets, or it has been idle an assignment's life.
func (st *stream) report(ctx context.Context, u *pb.RateLimitQuotaUsageReports_BucketQuotaUsage) *typepb.RateLimitStrategy {
	s := st.s
	id := u.GetBucketId().GetBucket()
	name := bucketName(id)
	sub := st.subs[name]
	if sub == nil {
		if sub = st.subscribe(name); sub == nil {
			return nil
		}
	}
	if cfg := s.Engine.Config(); sub.config != cfg {
		st.lookup(sub, name, id, cfg)
	}
	// Time is the server's: a client's time_elapsed cannot keep a
	// bucket measured as new, nor idle forever, nor inflate its demand.
	now := s.now()
	var elapsed time.Duration
	if !sub.seen.IsZero() {
		elapsed = now.Sub(sub.seen)
	}
	sub.seen = now
	n := u.GetNumRequestsAllowed() + u.GetNumRequestsDenied()
	if n == 0 {
		sub.idle += max(elapsed, 0)
	} else {
		sub.idle = 0
	}
	if !sub.found || sub.idle >= s.TTL() {
		st.drop(ctx, name, sub)
		return nil
	}
	b := &sub.bucket
	if sub.m != nil && (b.Unlimited || b.Rate == 0 || sub.m.d.key != b.Key) { // a reload changed its rule
		s.leave(ctx, sub.m)
		sub.m = nil
	}
	switch {
	case b.Unlimited:
		return allowAll
	case b.Rate == 0:
		return denyAll
	}
	if allowed := u.GetNumRequestsAllowed(); allowed > 0 {
		if err := s.Engine.ChargeBucket(ctx, *b, allowed); err != nil {
			s.log().Warn("rlqs: usage not counted", "domain", st.domain, "bucket", name, "allowed", allowed, "err", err)
		}
	}
	rate := st.share(ctx, name, sub, n, elapsed)
	if sub.last != nil && sub.rate <= rate && rate <= sub.rate*1.05 {
		// Up to 5% above the last: the same assignment, whose bucket
		// the client keeps (a new one starts full). Never one above
		// the share, so that the shares in force stay within the rate.
		return sub.last
	}
	sub.rate, sub.last = rate, assignment(rate, s.burst())
	return sub.last
}

// drop forgets sub, abandoned, and gives its share back (Server.leave).
func (st *stream) drop(ctx context.Context, name string, sub *subscription) {
	delete(st.subs, name)
	st.s.subs.Add(-1)
	st.release(sub)
	if sub.m != nil {
		st.s.leave(ctx, sub.m)
	}
}

// forget drops every demand of the stream, once it ends, within one
// report interval in all.
func (st *stream) forget() {
	ctx, cancel := context.WithTimeout(context.Background(), st.s.interval())
	defer cancel()
	for name, sub := range st.subs {
		st.drop(ctx, name, sub)
	}
}

func (s *Server) burst() time.Duration {
	if s.Burst > 0 {
		return s.Burst
	}
	return DefaultBurst
}

// sortedKeys is m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// bucketName is a bucket id as one string: its entries sorted by key,
// escaped (storekey.Join).
func bucketName(id map[string]string) string {
	parts := make([]string, 0, 2*len(id))
	for _, k := range sortedKeys(id) {
		parts = append(parts, k, id[k])
	}
	return storekey.Join(parts...)
}
