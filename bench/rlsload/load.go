// Package rlsload is a closed-loop gRPC load generator for rate limit
// services: Envoy RLS v3 (envoyproxy/ratelimit, `bouncer serve`) and,
// in a build with -tags gubernator, gubernator's own API.
//
// A Load holds gRPC connections to one server (or to each of several
// instances of one, Config.Addrs) and one request per key, built (and
// marshalled) in advance so that the generator spends its CPU on calls,
// not on building messages: it shares the machine with the server it
// measures. For the same reason it makes its calls, by default,
// with a minimal gRPC client of its own (Lean: unary calls over HTTP/2
// without TLS, on golang.org/x/net/http2's Framer), which costs a small
// fraction of grpc-go's CPU per call, so that the server, not the load
// generator, is what saturates; Config.Client selects grpc-go instead.
// Run then has a number of streams, each a goroutine that makes one unary
// call at a time, call after call, until they have made a given number of
// calls or a given time has passed, and reports calls per second,
// latency percentiles, and how many calls were allowed, denied and
// failed.
//
// Every call checks Descriptors keys: descriptors [{user_id: u<k>}] for
// Envoy RLS, one RateLimitReq each for gubernator, with k, k+1, ...
// taken from Keys distinct values. Stream i starts at key i·7919 mod Keys
// and walks the keys in order, so streams do not move in lockstep.
package rlsload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Protocol is the API a server speaks.
type Protocol int

const (
	// RLS is Envoy's rate limit service v3:
	// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit.
	RLS Protocol = iota
	// Gubernator is gubernator's pb.gubernator.V1/GetRateLimits. Only a
	// build with -tags gubernator speaks it (New fails in any other):
	// its generated types come with gubernator's module, which brings
	// some 300 packages that nothing else here needs.
	Gubernator
)

// workloads builds the calls of each protocol this build speaks: RLS
// always, Gubernator with -tags gubernator (gubernator.go adds it).
var workloads = map[Protocol]func(*Config) *workload{RLS: newRLS}

func (p Protocol) String() string {
	switch p {
	case RLS:
		return "rls"
	case Gubernator:
		return "gubernator"
	}
	return "Protocol(" + strconv.Itoa(int(p)) + ")"
}

// ParseProtocol returns the Protocol that String calls s.
func ParseProtocol(s string) (Protocol, error) {
	for _, p := range []Protocol{RLS, Gubernator} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("rlsload: unknown protocol %q (want rls or gubernator)", s)
}

// Client is the gRPC client a Load calls with.
type Client int

const (
	// Lean is rlsload's own client: unary calls over HTTP/2 with prior
	// knowledge (h2c, as gRPC without TLS), written directly on
	// golang.org/x/net/http2's Framer, with the requests' header block
	// and messages encoded in advance and frames of many calls batched
	// into one write. It costs a few microseconds of CPU per call, a
	// fraction of grpc-go's.
	Lean Client = iota
	// GRPC is grpc-go (google.golang.org/grpc), with its defaults.
	GRPC
)

func (c Client) String() string {
	switch c {
	case Lean:
		return "lean"
	case GRPC:
		return "grpc"
	}
	return "Client(" + strconv.Itoa(int(c)) + ")"
}

// ParseClient returns the Client that String calls s.
func ParseClient(s string) (Client, error) {
	for _, c := range []Client{Lean, GRPC} {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("rlsload: unknown client %q (want lean or grpc)", s)
}

// Config says where a Load sends its calls and what they ask. Zero fields
// take the defaults given.
type Config struct {
	// Addr is the server's gRPC address, host:port. Addr or Addrs is
	// required, not both.
	Addr string
	// Addrs are the gRPC addresses of several instances of one service,
	// which share the calls: stream i calls Addrs[i mod len(Addrs)].
	Addrs    []string
	Protocol Protocol
	// Client is the gRPC client that makes the calls. Default Lean.
	Client Client

	// Conns is how many gRPC connections the streams share, to each
	// address (stream i uses connection i mod (Conns·len(Addrs)), whose
	// address is Addrs[i mod len(Addrs)]). Default 4.
	Conns int

	// Domain is the RLS domain; for gubernator, a rate limit's name is
	// Domain_DescriptorKey. Default "bench".
	Domain string
	// DescriptorKey is the key of every descriptor entry. Default
	// "user_id".
	DescriptorKey string
	// ValuePrefix starts every descriptor value (then the key's number).
	// Default "u".
	ValuePrefix string
	// Keys is how many distinct values calls draw from. Default 10 000.
	Keys int
	// Descriptors is how many keys each call checks. Default 1.
	Descriptors int

	// Limit and Period are the limit each key is held to: gubernator is
	// told them in every request (as a token bucket); an RLS server is
	// configured with them on its own, and if Limit is set, every answer
	// must carry it as the descriptor's current limit (requests per unit).
	// Period defaults to one second.
	Limit  int64
	Period time.Duration

	// Global sets behaviour GLOBAL on every gubernator request: the node
	// asked answers from its own copy of the key's bucket and sends the
	// hits to the key's owner in the background, instead of forwarding
	// the request to the owner and waiting. Gubernator only.
	Global bool

	// CallTimeout bounds each call (and is sent as its grpc-timeout).
	// Default 5 s.
	CallTimeout time.Duration
}

// setDefaults fills the zero fields and checks the others; afterwards
// Addrs holds every address, Addr's too.
func (c *Config) setDefaults() error {
	switch {
	case c.Addr == "" && len(c.Addrs) == 0:
		return errors.New("rlsload: Config.Addr is required")
	case c.Addr != "" && len(c.Addrs) > 0:
		return errors.New("rlsload: Config.Addr and Config.Addrs both set")
	case c.Addr != "":
		c.Addrs = []string{c.Addr}
	case slices.Contains(c.Addrs, ""):
		return errors.New("rlsload: empty address in Config.Addrs")
	}
	c.Conns = cmp.Or(c.Conns, 4)
	c.Domain = cmp.Or(c.Domain, "bench")
	c.DescriptorKey = cmp.Or(c.DescriptorKey, "user_id")
	c.ValuePrefix = cmp.Or(c.ValuePrefix, "u")
	c.Keys = cmp.Or(c.Keys, 10_000)
	c.Descriptors = cmp.Or(c.Descriptors, 1)
	c.Period = cmp.Or(c.Period, time.Second)
	c.CallTimeout = cmp.Or(c.CallTimeout, 5*time.Second)
	switch {
	case c.Conns < 0 || c.Keys < 0 || c.Descriptors < 0 || c.Limit < 0 || c.Period < 0 || c.CallTimeout < 0:
		return errors.New("rlsload: negative Config field")
	case c.Descriptors > c.Keys:
		return fmt.Errorf("rlsload: %d descriptors per call need at least as many keys, have %d", c.Descriptors, c.Keys)
	case c.Protocol != RLS && c.Protocol != Gubernator:
		return fmt.Errorf("rlsload: unknown %v", c.Protocol)
	case workloads[c.Protocol] == nil:
		return errors.New("rlsload: gubernator: built without -tags gubernator")
	case c.Protocol == Gubernator && c.Limit == 0:
		return errors.New("rlsload: gubernator needs Config.Limit")
	case c.Global && c.Protocol != Gubernator:
		return fmt.Errorf("rlsload: Config.Global with %v; only gubernator has it", c.Protocol)
	case c.Client != Lean && c.Client != GRPC:
		return fmt.Errorf("rlsload: unknown %v", c.Client)
	}
	return nil
}

// value returns the descriptor value of key k.
func (c *Config) value(k int) string { return c.ValuePrefix + strconv.Itoa(k) }

// outcome is what one call's answer says.
type outcome int

const (
	allowed outcome = iota
	denied
	failed
)

// caller makes calls of one protocol on one connection: call(ctx, k)
// sends the request for the keys that start at k, and gives up after
// Config.CallTimeout or when ctx is done.
type caller interface {
	call(ctx context.Context, k int) (outcome, error)
	Close() error
}

// Load is a prepared workload against one server, or several instances
// of one. Its Run may be called many times, but not concurrently.
type Load struct {
	cfg     Config
	callers []caller // one per connection; callers[i] to Addrs[i mod len(Addrs)]
}

// New connects to cfg.Addr or cfg.Addrs (lazily: the first call dials)
// and builds every request Run will send.
func New(cfg Config) (*Load, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	w := workloads[cfg.Protocol](&cfg)
	l := &Load{cfg: cfg}
	for i := range cfg.Conns * len(cfg.Addrs) {
		addr := cfg.Addrs[i%len(cfg.Addrs)]
		var c caller
		var err error
		switch cfg.Client {
		case Lean:
			c = newLeanCaller(&cfg, addr, w)
		case GRPC:
			c, err = newGRPCCaller(&cfg, addr, w)
		}
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("rlsload: %w", err)
		}
		l.callers = append(l.callers, c)
	}
	return l, nil
}

// Close closes the connections.
func (l *Load) Close() error {
	var errs []error
	for _, c := range l.callers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Spec is one run: Streams concurrent callers (default 1) that stop after
// Calls calls all together, if Calls > 0, or else after Duration.
type Spec struct {
	Streams  int
	Calls    int64
	Duration time.Duration
}

// Result is what a run measured.
type Result struct {
	Calls     int64 // calls made
	Allowed   int64 // calls answered OK (every descriptor under its limit)
	Denied    int64 // calls answered OVER_LIMIT
	Failed    int64 // calls that failed, or whose answer was not as expected
	FirstErr  error // the first failure, if any
	Keys      int   // distinct keys the calls checked
	Streams   int
	Elapsed   time.Duration // from the first stream's start to the last stream's end
	P50, P99  time.Duration // latency percentiles of one call (nearest rank)
	P999, Max time.Duration
}

// PerSecond returns calls per second.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

func (r Result) String() string {
	s := fmt.Sprintf("%d calls in %v on %d streams: %.0f calls/s, p50 %v, p99 %v, p99.9 %v, max %v; %d ok, %d over limit, %d failed; %d keys",
		r.Calls, r.Elapsed.Round(time.Millisecond), r.Streams, r.PerSecond(),
		r.P50, r.P99, r.P999, r.Max, r.Allowed, r.Denied, r.Failed, r.Keys)
	if r.FirstErr != nil {
		s += "; first error: " + r.FirstErr.Error()
	}
	return s
}

// Run runs s against the server and returns what it measured. It returns
// an error, with the Result, when the run was not the workload asked for:
// no call was made, every call failed, or the calls checked fewer
// distinct keys than the busiest stream alone should have. Other failures
// and denials are counted in the Result, for the caller to judge.
func (l *Load) Run(ctx context.Context, s Spec) (Result, error) {
	streams := max(s.Streams, 1)
	if s.Calls <= 0 && s.Duration <= 0 {
		return Result{}, errors.New("rlsload: Spec needs Calls or Duration")
	}
	keys, d := l.cfg.Keys, l.cfg.Descriptors
	type stream struct {
		lat                     []time.Duration
		allowed, denied, failed int64
		err                     error
		used                    []uint64 // bit k: key k was checked
		_                       [64]byte // keep streams' counters apart
	}
	ss := make([]stream, streams)
	var stop atomic.Bool
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for g := range ss {
		st := &ss[g]
		n := int64(-1) // calls this stream makes; -1 until stopped
		if s.Calls > 0 {
			n = (int64(g)+1)*s.Calls/int64(streams) - int64(g)*s.Calls/int64(streams)
			st.lat = make([]time.Duration, 0, n)
		} else {
			st.lat = make([]time.Duration, 0, 1<<12)
		}
		st.used = make([]uint64, (keys+63)/64)
		c := l.callers[g%len(l.callers)]
		k := g * 7919 % keys
		wg.Go(func() {
			<-begin
			for i := int64(0); i != n && !stop.Load(); i++ {
				t0 := time.Now()
				o, err := c.call(ctx, k)
				st.lat = append(st.lat, time.Since(t0))
				switch o {
				case allowed:
					st.allowed++
				case denied:
					st.denied++
				default:
					if st.failed++; st.err == nil {
						st.err = err
					}
				}
				for j := range d {
					kj := (k + j) % keys
					st.used[kj/64] |= 1 << (kj % 64)
				}
				if k++; k == keys {
					k = 0
				}
			}
		})
	}
	var timer *time.Timer
	start := time.Now()
	close(begin)
	if s.Calls <= 0 {
		timer = time.AfterFunc(s.Duration, func() { stop.Store(true) })
	}
	// A cancelled ctx fails every call at once; stop rather than spin.
	stopOnDone := context.AfterFunc(ctx, func() { stop.Store(true) })
	wg.Wait()
	elapsed := time.Since(start)
	stopOnDone()
	if timer != nil {
		timer.Stop()
	}

	r := Result{Streams: streams, Elapsed: elapsed}
	used := make([]uint64, (keys+63)/64)
	var lat []time.Duration
	busiest := 0
	for i := range ss {
		st := &ss[i]
		r.Allowed += st.allowed
		r.Denied += st.denied
		r.Failed += st.failed
		if r.FirstErr == nil {
			r.FirstErr = st.err
		}
		for w := range used {
			used[w] |= st.used[w]
		}
		busiest = max(busiest, len(st.lat))
		lat = append(lat, st.lat...)
	}
	r.Calls = int64(len(lat))
	for _, w := range used {
		r.Keys += bits.OnesCount64(w)
	}
	slices.Sort(lat)
	r.P50, r.P99, r.P999 = percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 0.999)
	if len(lat) > 0 {
		r.Max = lat[len(lat)-1]
	}
	switch want := min(keys, busiest+d-1); {
	case r.Calls == 0:
		return r, errors.New("rlsload: no call was made")
	case r.Failed == r.Calls:
		return r, fmt.Errorf("rlsload: all %d calls failed; first error: %w", r.Calls, r.FirstErr)
	case r.Keys < want:
		return r, fmt.Errorf("rlsload: calls checked %d distinct keys, want at least %d", r.Keys, want)
	}
	return r, nil
}

// percentile returns the nearest-rank q-quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}
