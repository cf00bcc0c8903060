package redisstore

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
)

// PinClock makes the store made from o decide at now() instead of Redis's
// TIME, so that the conformance suite's fake clock drives it.
func PinClock(o *Options, now func() time.Time) { o.now = now }

// BucketOf returns the bucket of key in a store of DefaultBuckets.
func BucketOf(key string) uint64 { return digestOf(key, DefaultBuckets).bucket }

// LimitID is limitID, the name of a limit's state in Redis keys.
func LimitID(l bouncer.Limit) string { return limitID(l) }

// StateOf returns the Redis hash and field that hold key's one-word state
// under l in a store of prefix and DefaultBuckets.
func StateOf(prefix string, l bouncer.Limit, key string) (hash, field string) {
	return hashField(prefix, limitID(l), digestOf(key, DefaultBuckets))
}

// BatchCall returns the keys and arguments of the one script call that a
// batch of the checks reqs makes, packed or in the general batch format
// ("b"), and runs such calls. Every request must be valid, with one key
// and one limit.
func BatchCall(s *Store, reqs []bouncer.Request, packed bool) (keys, args []string, err error) {
	cs := make([]*call, len(reqs))
	ws := make([]*waiter, len(reqs))
	for i, r := range reqs {
		calls, err := s.plan(r, "c")
		if err != nil {
			return nil, nil, err
		}
		cs[i], ws[i] = &calls[0], &waiter{c: &calls[0]}
		keys = append(keys, calls[0].keys...)
	}
	if packed {
		return keys, packedArgs(cs[0].args[0], cs, false), nil
	}
	var ks []string
	return keys, batchArgs(ws, &ks), nil
}

// ExecScript runs the check script with keys and args.
func ExecScript(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	return checkScript.Exec(ctx, c, keys, args)
}

// ClusterBatchCall returns the keys and arguments of the script call that
// a Cluster's batch of the checks reqs makes ("P"). Every request must be
// valid, with one key and one limit.
func ClusterBatchCall(s *Store, reqs []bouncer.Request) (keys, args []string, err error) {
	cs := make([]*call, len(reqs))
	for i, r := range reqs {
		calls, err := s.plan(r, "c")
		if err != nil {
			return nil, nil, err
		}
		cs[i] = &calls[0]
	}
	return cs[0].keys[:1], packedArgs(cs[0].args[0], cs, true), nil
}

// KeySlot is keySlot, the Cluster slot of a key.
func KeySlot(key string) uint16 { return keySlot(key) }

// MisplaceSlots makes s believe, until it reads the Cluster's map again,
// that one node serves every slot.
func MisplaceSlots(s *Store) {
	m := &slotMap{at: time.Now(), nodes: []*node{s.nodes.one}}
	for i := range m.node {
		m.node[i] = 1
	}
	s.slots.cur.Store(m)
	s.slots.stale.Store(false)
}

// SlotMapNodes is how many nodes s's map of slots names (0 without one).
func SlotMapNodes(s *Store) int {
	m := s.slots.cur.Load()
	if m == nil {
		return 0
	}
	seen := map[uint16]bool{}
	for _, n := range m.node {
		seen[n] = true
	}
	return len(seen)
}

// PackedReplyLen is the length of one check's reply in a packed batch.
const PackedReplyLen = packedReplyLen

// LaneOf is the batching lane (see batch.go) of a check of key under l:
// on a Cluster, that of the node that serves the key by s's map of slots.
func LaneOf(s *Store, key string, l bouncer.Limit) (int, error) {
	calls, err := s.plan(bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: 1}, "c")
	if err != nil {
		return 0, err
	}
	ln := s.batch.laneOf(&calls[0])
	for i := range s.batch.lanes {
		if &s.batch.lanes[i] == ln {
			return i, nil
		}
	}
	panic("lane not found")
}

// ReadSlots makes s read its map of the Cluster's slots now.
func ReadSlots(s *Store) {
	s.slots.stale.Store(true)
	s.slotMap(time.Now().Add(time.Second))
}

// LaneWorkers is how many workers each of s's batching lanes runs.
func LaneWorkers(s *Store) []int {
	n := make([]int, len(s.batch.lanes))
	for i := range s.batch.lanes {
		n[i] = int(s.batch.lanes[i].workers.Load())
	}
	return n
}

// LaneWaiting is how many callers each of s's batching lanes counts as
// waiting (lane.waiting).
func LaneWaiting(s *Store) []int {
	n := make([]int, len(s.batch.lanes))
	for i := range s.batch.lanes {
		n[i] = int(s.batch.lanes[i].waiting.Load())
	}
	return n
}

// LaneMaxWorkers is how many workers a lane of a Cluster's store runs at
// most; StandaloneWorkers how many a standalone store's one lane runs at
// most, and StandaloneBusy how many queued callers start another;
// BatchMax how many checks one batch holds at most.
const (
	LaneMaxWorkers    = clusterLaneWorkers
	StandaloneWorkers = batchWorkers
	StandaloneBusy    = batchBusy
	BatchMax          = batchMax
)

// CheckLua is the check script's source.
var CheckLua = checkLua

// SetHealthHooks makes the store made from o run its breakers on clock
// and probe its nodes with ping (nil: the real one) instead of a PING.
func SetHealthHooks(o *Options, clock func() time.Time, ping func(ctx context.Context, addr string) error) {
	o.clock, o.ping = clock, ping
}

// Settle waits until no liveness probe of s is in flight (and, for a
// store still connecting, until it connects or closes).
func Settle(s *Store) { s.health.wg.Wait() }
