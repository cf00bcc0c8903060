package rlqs

import (
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer/rules"
)

// Defaults of the Server's bounds on what its clients make it hold
// (docs/rlqs.md gives what each costs in memory at most).
const (
	// DefaultMaxConnStreams bounds the streams one connection holds
	// open at once.
	DefaultMaxConnStreams = 8
	// DefaultMaxSubscriptions bounds the buckets every stream of a
	// Server holds, in all.
	DefaultMaxSubscriptions = 200_000
	// DefaultMaxConnIDBytes bounds the bytes of bucket ids that the
	// streams of one connection hold.
	DefaultMaxConnIDBytes = 2 << 20
	// DefaultMaxIDBytes bounds the bytes of bucket ids that every
	// stream of a Server holds, in all.
	DefaultMaxIDBytes = 64 << 20
)

// connHold is what the streams of one client connection hold together.
type connHold struct {
	name    string // peerName
	streams int    // open, under Server.connMu
	idBytes atomic.Int64
}

// bounds is a Server's count of what its connections hold.
type bounds struct {
	connMu sync.Mutex
	conns  map[string]*connHold

	idBytes                                             atomic.Int64
	refusedStreams                                      atomic.Uint64
	overBuckets, overSubs, overConnIDBytes, overIDBytes atomic.Uint64
}

// open admits a new stream of the connection named peer, or refuses it
// with RESOURCE_EXHAUSTED when that connection already holds
// MaxConnStreams streams open. The stream's close gives its place back.
func (s *Server) open(peer string) (*stream, error) {
	limit := positive(s.MaxConnStreams, DefaultMaxConnStreams)
	s.connMu.Lock()
	if s.conns == nil {
		s.conns = map[string]*connHold{}
	}
	c := s.conns[peer]
	if c == nil {
		c = &connHold{name: peer}
		s.conns[peer] = c
	}
	if c.streams >= limit {
		s.connMu.Unlock()
		s.refusedStreams.Add(1)
		return nil, status.Errorf(codes.ResourceExhausted, "rlqs: this connection has %d streams open, at most %d (MaxConnStreams): report every bucket on one stream", c.streams, limit)
	}
	c.streams++
	s.connMu.Unlock()
	s.streams.Add(1)
	return &stream{s: s, conn: c, client: s.clientID(), peer: peer, subs: map[string]*subscription{}}, nil
}

// close gives st's place on its connection back, once its
// subscriptions are dropped (forget).
func (st *stream) close() {
	s := st.s
	s.streams.Add(-1)
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if st.conn.streams--; st.conn.streams == 0 {
		delete(s.conns, st.conn.name)
	}
}

// subscribe admits a new bucket, named name, on st, or returns nil when
// st holds MaxBuckets buckets or the Server MaxSubscriptions.
func (st *stream) subscribe(name string) *subscription {
	s := st.s
	if len(st.subs) >= positive(s.MaxBuckets, DefaultMaxBuckets) {
		s.overBuckets.Add(1)
		return nil
	}
	if s.subs.Add(1) > int64(positive(s.MaxSubscriptions, DefaultMaxSubscriptions)) {
		s.subs.Add(-1)
		s.overSubs.Add(1)
		return nil
	}
	sub := &subscription{}
	st.subs[name] = sub
	return sub
}

// lookup finds sub's bucket, id, in cfg, keeping of the id only its
// name and the bucket's store key, both bounded by storekey, never its
// raw entries. Those bytes are held against MaxConnIDBytes and
// MaxIDBytes; a bucket past either is not found, and so abandoned.
func (st *stream) lookup(sub *subscription, name string, id map[string]string, cfg *rules.Config) {
	b, found, err := st.s.Engine.Bucket(st.domain, id)
	b.Entries = nil
	st.release(sub)
	sub.bucket, sub.found, sub.config = b, found && err == nil, cfg
	if sub.found {
		sub.found = st.hold(sub, int64(len(name)+len(b.Key)))
	}
}

// hold counts n bytes of ids for sub, or reports false past a bound.
func (st *stream) hold(sub *subscription, n int64) bool {
	s := st.s
	if st.conn.idBytes.Add(n) > int64(positive(s.MaxConnIDBytes, DefaultMaxConnIDBytes)) {
		st.conn.idBytes.Add(-n)
		s.overConnIDBytes.Add(1)
		return false
	}
	if s.idBytes.Add(n) > int64(positive(s.MaxIDBytes, DefaultMaxIDBytes)) {
		s.idBytes.Add(-n)
		st.conn.idBytes.Add(-n)
		s.overIDBytes.Add(1)
		return false
	}
	sub.held = n
	return true
}

// release gives back the bytes of ids sub holds.
func (st *stream) release(sub *subscription) {
	st.conn.idBytes.Add(-sub.held)
	st.s.idBytes.Add(-sub.held)
	sub.held = 0
}

// positive is v, or def when v is 0 or less.
func positive(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
