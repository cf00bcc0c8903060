package rlqs

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ClientOptions configure a Client as Envoy's rate limit quota filter is
// configured (its RateLimitQuotaBucketSettings).
type ClientOptions struct {
	// Domain is the domain the client's stream is bound to. Required.
	Domain string

	// Interval is how often Run reports (DefaultInterval when 0).
	Interval time.Duration

	// NoAssignment decides a bucket's requests until the server first
	// assigns it something (no_assignment_behavior): nil allows all.
	NoAssignment *typepb.RateLimitStrategy

	// Expired decides a bucket's requests once its assignment's time to
	// live is over (expired_assignment_behavior's fallback_rate_limit);
	// with ReuseLastAssignment the expired assignment goes on deciding
	// instead. Neither: the bucket goes back to NoAssignment.
	Expired             *typepb.RateLimitStrategy
	ReuseLastAssignment bool

	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// A Client behaves as Envoy's rate limit quota filter does, for gRPC-Go
// servers (until gRPC ships A77) and as a load generator: it sorts
// requests into buckets by their bucket ids, decides each request locally
// by its bucket's assignment, and reports every bucket's usage on one
// stream: every Interval (Run), and at once when a bucket sees its first
// request. Safe for concurrent use.
type Client struct {
	o      ClientOptions
	stream grpc.BidiStreamingClient[pb.RateLimitQuotaUsageReports, pb.RateLimitQuotaResponse]
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{} // closed when the receiving goroutine ends

	mu       sync.Mutex
	buckets  map[string]*clientBucket
	sent     uint64 // reports sent
	answered uint64 // responses received
	answer   chan struct{}
	err      error // why the stream ended
	sendMu   sync.Mutex
}

type clientBucket struct {
	id               *pb.BucketId
	allowed, denied  uint64
	since            time.Time                 // of the usage not reported yet
	strategy         *typepb.RateLimitStrategy // assigned
	active           *typepb.RateLimitStrategy // the token bucket tokens belongs to
	expires          time.Time                 // zero: no assignment
	tokens, capacity float64
	rate             float64 // tokens a second
	filled           time.Time
}

// NewClient opens a stream to the RLQS server on cc. Close ends it.
func NewClient(ctx context.Context, cc grpc.ClientConnInterface, o ClientOptions) (*Client, error) {
	if o.Domain == "" {
		return nil, errors.New("rlqs: ClientOptions.Domain is required")
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := pb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	c := &Client{
		o: o, stream: stream, cancel: cancel,
		kick: make(chan struct{}, 1), done: make(chan struct{}),
		buckets: map[string]*clientBucket{}, answer: make(chan struct{}),
	}
	go c.receive()
	return c, nil
}

func (c *Client) now() time.Time {
	if c.o.Now != nil {
		return c.o.Now()
	}
	return time.Now()
}

// Allow decides one request of the bucket id, and counts it for the next
// report.
func (c *Client) Allow(id map[string]string) bool {
	ok, _ := c.allow(id)
	return ok
}

// allow is Allow, and for a denied request how long until its bucket
// would admit one: -1 when that is not known (a blanket DENY_ALL lasts
// until the next assignment).
func (c *Client) allow(id map[string]string) (bool, time.Duration) {
	name := bucketName(id)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buckets[name]
	if b == nil {
		b = &clientBucket{id: &pb.BucketId{Bucket: id}, since: now}
		c.buckets[name] = b
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	ok, wait := c.decide(b, now)
	if ok {
		b.allowed++
	} else {
		b.denied++
	}
	return ok, wait
}

// decide applies b's strategy now: its assignment, or what stands in for
// one. A token bucket starts full when it starts deciding, and keeps its
// tokens while the same strategy decides.
func (c *Client) decide(b *clientBucket, now time.Time) (bool, time.Duration) {
	s := b.strategy
	switch {
	case b.expires.IsZero():
		s = c.o.NoAssignment
	case !now.Before(b.expires) && !c.o.ReuseLastAssignment:
		s = c.o.Expired
		if s == nil {
			s = c.o.NoAssignment
		}
	}
	tb := s.GetTokenBucket()
	if tb == nil {
		return decideStateless(s), -1
	}
	if s != b.active && !proto.Equal(s, b.active) {
		b.active, b.capacity, b.rate = s, float64(tb.GetMaxTokens()), Rate(s)
		b.tokens, b.filled = b.capacity, now
	}
	b.tokens = min(b.capacity, b.tokens+now.Sub(b.filled).Seconds()*b.rate)
	b.filled = now
	if b.tokens < 1 {
		if b.rate <= 0 {
			return false, -1
		}
		return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
	}
	b.tokens--
	return true, 0
}

// decideStateless decides by a blanket rule (nil allows all).
func decideStateless(s *typepb.RateLimitStrategy) bool {
	if s == nil {
		return true
	}
	if br, ok := s.GetStrategy().(*typepb.RateLimitStrategy_BlanketRule_); ok {
		return br.BlanketRule == typepb.RateLimitStrategy_ALLOW_ALL
	}
	return true
}

// Report sends the usage of every bucket since the last report.
func (c *Client) Report() error {
	now := c.now()
	c.mu.Lock()
	msg := &pb.RateLimitQuotaUsageReports{Domain: c.o.Domain}
	for _, b := range c.buckets {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &pb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           b.id,
			TimeElapsed:        durationpb.New(now.Sub(b.since)),
			NumRequestsAllowed: b.allowed,
			NumRequestsDenied:  b.denied,
		})
		b.allowed, b.denied, b.since = 0, 0, now
	}
	c.sent++
	c.mu.Unlock()
	c.sendMu.Lock()
	err := c.stream.Send(msg)
	c.sendMu.Unlock()
	if errors.Is(err, io.EOF) {
		// The server ended the stream; receive has its status.
		<-c.done
		return c.Err()
	}
	return err
}

// Sync reports, and waits until the server has answered the report.
func (c *Client) Sync(ctx context.Context) error {
	if err := c.Report(); err != nil {
		return err
	}
	c.mu.Lock()
	want := c.sent
	c.mu.Unlock()
	return c.WaitAnswers(ctx, want)
}

// WaitAnswers waits until the server has answered n reports since the
// stream opened (one answer per report, in order), the stream ends, or
// ctx does.
func (c *Client) WaitAnswers(ctx context.Context, n uint64) error {
	for {
		c.mu.Lock()
		got, wait, err := c.answered, c.answer, c.err
		c.mu.Unlock()
		if got >= n {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Run reports every Interval, and when a bucket sees its first request,
// until ctx ends or the stream fails.
func (c *Client) Run(ctx context.Context) error {
	every := c.o.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return c.Err()
		case <-t.C:
		case <-c.kick:
		}
		if err := c.Report(); err != nil {
			return err
		}
	}
}

// receive applies the server's answers until the stream ends.
func (c *Client) receive() {
	defer close(c.done)
	for {
		resp, err := c.stream.Recv()
		c.mu.Lock()
		if err != nil {
			c.err = err
			close(c.answer)
			c.mu.Unlock()
			return
		}
		now := c.now()
		for _, a := range resp.GetBucketAction() {
			c.apply(a, now)
		}
		c.answered++
		close(c.answer)
		c.answer = make(chan struct{})
		c.mu.Unlock()
	}
}

// apply takes one bucket action.
func (c *Client) apply(a *pb.RateLimitQuotaResponse_BucketAction, now time.Time) {
	name := bucketName(a.GetBucketId().GetBucket())
	b := c.buckets[name]
	if b == nil {
		return
	}
	if a.GetAbandonAction() != nil {
		delete(c.buckets, name)
		return
	}
	qa := a.GetQuotaAssignmentAction()
	if qa == nil {
		return
	}
	s := qa.GetRateLimitStrategy()
	b.expires = now.Add(qa.GetAssignmentTimeToLive().AsDuration())
	if !proto.Equal(s, b.strategy) {
		b.strategy = s // an identical one keeps the old, and its tokens
	}
}

// Err is why the stream ended, or nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the stream.
func (c *Client) Close() error {
	c.sendMu.Lock()
	err := c.stream.CloseSend()
	c.sendMu.Unlock()
	c.cancel()
	<-c.done
	return err
}

// Assignment is the bucket id's assignment, whatever its time to live;
// nil when the server has assigned it none (or abandoned it).
func (c *Client) Assignment(id map[string]string) *typepb.RateLimitStrategy {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.buckets[bucketName(id)]; b != nil {
		return b.strategy
	}
	return nil
}

// Rate is the requests a second s admits: a token bucket's fill rate,
// +Inf for ALLOW_ALL (and nil), 0 for DENY_ALL.
func Rate(s *typepb.RateLimitStrategy) float64 {
	if tb := s.GetTokenBucket(); tb != nil {
		per := uint32(1)
		if tb.GetTokensPerFill() != nil {
			per = tb.GetTokensPerFill().GetValue()
		}
		if fill := tb.GetFillInterval().AsDuration(); fill > 0 {
			return float64(per) / fill.Seconds()
		}
		return 0
	}
	if decideStateless(s) {
		return math.Inf(1)
	}
	return 0
}
