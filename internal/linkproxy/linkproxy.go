package linkproxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Proxy. The zero value forwards without delay.
type Options struct {
	// Delay is added to every chunk of bytes in each direction, so that
	// a round trip through the proxy takes 2 × Delay longer. SetDelay
	// changes it at runtime. It must not be negative. Connecting is not
	// delayed: a client's connect completes at once, where on a real
	// link it takes a round trip.
	Delay time.Duration
	// Jitter, if positive, adds to each chunk's delay a duration drawn
	// uniformly from [0, Jitter]. Bytes still keep their order: a chunk
	// that drew a shorter delay than the one before it leaves right after
	// it. A round trip of 50–150 ms is Delay 25 ms and Jitter 50 ms. It
	// must not be negative.
	Jitter time.Duration
	// Seed seeds the draws of Jitter, so that a run draws the same
	// sequence of delays each time (which chunk gets which depends on how
	// the connections' bytes interleave).
	Seed uint64
}

// Stats counts what went through a Proxy since New.
type Stats struct {
	Accepted   int64 // connections accepted
	ToTarget   int64 // bytes passed on to the target
	FromTarget int64 // bytes passed back from the target to clients
}

// A Proxy forwards the connections it accepts on Addr to its target. Its
// methods are safe for concurrent use.
type Proxy struct {
	target string
	jitter time.Duration
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	delay  atomic.Int64 // the one-way delay, a time.Duration
	closed sync.Once

	mu  sync.Mutex
	rng *rand.Rand
	// up is closed while the link is up, and open while it is
	// partitioned: waiting for it is waiting for the link.
	up chan struct{}

	accepted, toTarget, fromTarget atomic.Int64
}

// New starts a Proxy to target, a host:port, listening on a free port of
// the loopback interface. The target need not be up: a connection the
// proxy cannot pass on is closed.
func New(target string, o Options) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("linkproxy: target %q: %w", target, err)
	}
	if o.Delay < 0 || o.Jitter < 0 {
		return nil, fmt.Errorf("linkproxy: delay %v and jitter %v must not be negative", o.Delay, o.Jitter)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("linkproxy: %w", err)
	}
	up := make(chan struct{})
	close(up)
	p := &Proxy{target: target, jitter: o.Jitter, ln: ln, up: up, rng: rand.New(rand.NewPCG(o.Seed, o.Seed))}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.delay.Store(int64(o.Delay))
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients connect to, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets the one-way delay of the chunks read from now on, on
// every connection; a negative d counts as zero. Chunks already on their
// way keep the delay they were given.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(max(d, 0))) }

// Partition cuts the link: from its return, no byte and no end of stream
// is delivered in either direction, and nothing is reset. Bytes in
// flight and bytes sent meanwhile are held (up to a bound per
// connection, past which the sender's writes block as on a full TCP
// window), and new connections are accepted but reach the target only
// when the link heals. A chunk whose write had begun when Partition was
// called completes. Partitioning a partitioned link does nothing.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.up:
		p.up = make(chan struct{})
	default:
	}
}

// Heal ends a partition: what the partition held is delivered, in order,
// and traffic flows again, on the connections made before and during
// the partition alike. Healing a link that is up does nothing.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.up:
	default:
		close(p.up)
	}
}

// Stats returns the proxy's counters. A byte is counted as it is handed
// to the receiving socket, so once a peer has read a byte, it is counted.
func (p *Proxy) Stats() Stats {
	return Stats{Accepted: p.accepted.Load(), ToTarget: p.toTarget.Load(), FromTarget: p.fromTarget.Load()}
}

// Close stops the proxy: it stops listening, closes every connection
// (dropping what they held) and returns when all its goroutines have
// ended. Closing a closed Proxy does nothing.
func (p *Proxy) Close() error {
	var err error
	p.closed.Do(func() {
		p.cancel()
		err = p.ln.Close()
		p.wg.Wait()
	})
	return err
}

// accept serves each connection the listener accepts, until Close.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			// Close, or a loopback listener out of file descriptors:
			// either way the proxy stops accepting rather than spin.
			return
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

// waitUp waits until the link is up; it reports false if ctx ended first.
func (p *Proxy) waitUp(ctx context.Context) bool {
	p.mu.Lock()
	up := p.up
	p.mu.Unlock()
	select {
	case <-up:
		return true
	case <-ctx.Done():
		return false
	}
}

// nextDelay returns the delay of a chunk read now.
func (p *Proxy) nextDelay() time.Duration {
	d := time.Duration(p.delay.Load())
	if p.jitter > 0 {
		p.mu.Lock()
		d += time.Duration(p.rng.Int64N(int64(p.jitter) + 1))
		p.mu.Unlock()
	}
	return d
}
