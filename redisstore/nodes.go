package redisstore

import (
	"context"
	"sync"
)

// nodes are the Redis nodes a store has met, each with its breaker (see
// health.go): a standalone server's one, or a Cluster's masters by
// address, as the store's map of slots names them. rueidis routes every
// call; the map only says which node's breaker a call answers to.
type nodes struct {
	mu     sync.Mutex
	byAddr map[string]*node
	list   []*node // in the order met
	one    *node   // standalone: the server; Cluster: slots no known master serves
}

// init makes the first node: the server of a standalone client, or the
// node of a Cluster's unmapped slots.
func (ns *nodes) init(s *Store) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	addr := ""
	if !s.cluster {
		for a := range s.client.Nodes() {
			addr = a
		}
	}
	ns.byAddr = map[string]*node{}
	ns.one = newNode(addr, s.health)
	ns.list = []*node{ns.one}
	if addr != "" {
		ns.byAddr[addr] = ns.one
	}
}

// get returns the node of addr, made if new.
func (ns *nodes) get(s *Store, addr string) *node {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	n, ok := ns.byAddr[addr]
	if !ok {
		n = newNode(addr, s.health)
		ns.byAddr[addr] = n
		ns.list = append(ns.list, n)
	}
	return n
}

func (ns *nodes) all() []*node {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return append([]*node(nil), ns.list...)
}

// nodeOf returns the node whose breaker c answers to: on a Cluster, the
// master that served its keys' slot when the store last read the map.
func (s *Store) nodeOf(c *check) *node {
	if c.node == nil {
		c.node = s.nodeOfKey(c.refs[0].rkey)
	}
	return c.node
}

func (s *Store) nodeOfKey(key string) *node {
	if !s.cluster {
		return s.nodes.one
	}
	m := s.slotMap()
	if m == nil {
		return s.nodes.one
	}
	i := m.node[keySlot(key)]
	if i == 0 {
		return s.nodes.one
	}
	return m.nodes[i-1]
}

// ping is the liveness probe of n: a PING to the node itself.
func (s *Store) ping(ctx context.Context, n *node) error {
	c := s.client
	if s.cluster && n.addr != "" {
		if nc, ok := s.client.Nodes()[n.addr]; ok {
			c = nc
		}
	}
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

// nodeOpened is told when n's breaker opens: on a Cluster, the map of
// slots may be behind a failover, and is read again before it serves.
func (s *Store) nodeOpened(*node) {
	if s.cluster {
		s.slots.stale.Store(true)
	}
}
