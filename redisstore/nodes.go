package redisstore

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// breakers are a store's circuit breakers, one per Redis node it has met
// (a standalone server's one, or a Cluster's masters by address, as the
// store's map of slots names them), and what they share: options, clock,
// logger, liveness probe. rueidis routes every call; the map only says
// which node's breaker a call answers to.
type breakers struct {
	probeTimeout time.Duration
	openFor      time.Duration
	now          func() time.Time
	log          *slog.Logger

	// wait is how long an open breaker waits before a trial, and a store
	// that could not connect before its next attempt, for a nominal d:
	// jittered by default; tests pin it.
	wait func(d time.Duration) time.Duration

	// ping probes a node; opened is told when a breaker opens (a
	// Cluster's map of slots may have changed).
	ping   func(ctx context.Context, b *breaker) error
	opened func(b *breaker)

	ctx    context.Context // canceled by close: probes (and connecting) stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // probes in flight, and the store's connecting

	mu     sync.Mutex
	byAddr map[string]*breaker
	list   []*breaker // in the order met
	one    *breaker   // standalone: the server's; Cluster: slots no known master serves
}

func newBreakers(o BreakerOptions, now func() time.Time, log *slog.Logger) *breakers {
	bs := &breakers{probeTimeout: o.ProbeTimeout, openFor: o.OpenFor, now: now, log: log, wait: jittered}
	if bs.probeTimeout <= 0 {
		bs.probeTimeout = DefaultProbeTimeout
	}
	if bs.openFor <= 0 {
		bs.openFor = DefaultOpenFor
	}
	bs.ctx, bs.cancel = context.WithCancel(context.Background())
	return bs
}

// close stops the probes in flight and waits for them.
func (bs *breakers) close() {
	bs.cancel()
	bs.wg.Wait()
}

// init makes the first breaker: that of the standalone server at addr,
// or, with addr "", of a Cluster's unmapped slots.
func (bs *breakers) init(addr string) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.byAddr = map[string]*breaker{}
	bs.one = newBreaker(addr, bs)
	bs.list = []*breaker{bs.one}
	if addr != "" {
		bs.byAddr[addr] = bs.one
	}
}

// get returns the breaker of addr, made if new.
func (bs *breakers) get(addr string) *breaker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b, ok := bs.byAddr[addr]
	if !ok {
		b = newBreaker(addr, bs)
		bs.byAddr[addr] = b
		bs.list = append(bs.list, b)
	}
	return b
}

func (bs *breakers) all() []*breaker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return append([]*breaker(nil), bs.list...)
}

// breakerOf returns the breaker p answers to: on a Cluster, that of the
// master that served its group's slot when the store last read the map.
func (s *Store) breakerOf(p *part) *breaker {
	if p.breaker == nil {
		p.breaker = s.breakers.one
		if !s.cluster {
			return p.breaker
		}
		if m := s.slotMap(); m != nil && m.group[p.group] != nil {
			p.breaker = m.group[p.group]
		}
	}
	return p.breaker
}

// ping is the liveness probe of b's node: a PING to the node itself.
func (s *Store) ping(ctx context.Context, b *breaker) error {
	c := s.client
	if s.cluster && b.addr != "" {
		if nc, ok := s.client.Nodes()[b.addr]; ok {
			c = nc
		}
	}
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

// breakerOpened is told when a breaker opens: on a Cluster, the map of
// slots may be behind a failover, and is read again before it serves.
func (s *Store) breakerOpened(*breaker) {
	if s.cluster {
		s.slots.stale.Store(true)
	}
}
