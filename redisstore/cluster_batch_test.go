package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// The store computes a key's Cluster slot as the Cluster does.
func TestKeySlotMatchesCluster(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_CLUSTER_ADDRS"))
	keys := []string{
		"", "a", "123456789", "{user1000}.following", "{user1000}.followers",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "x{y",
		"bouncer:0a1b2c3d4e5f:{16383}", "bouncer:0a1b2c3d4e5f:{0}\x00\xff",
	}
	for _, k := range keys {
		want, err := c.Do(context.Background(), c.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got := redisstore.KeySlot(k); int64(got) != want {
			t.Errorf("slot of %q: %d, Cluster says %d", k, got, want)
		}
	}
	if got := redisstore.KeySlot("123456789"); got != 0x31C3%16384 {
		t.Errorf("slot of 123456789: %d, want CRC-16/XMODEM's check value %d", got, 0x31C3%16384)
	}
}

// A Cluster's batch whose map of slots is wrong: the script decides the
// checks before the first whose key another node serves, then stops
// without changing anything of that check or the rest, and says why.
func TestClusterBatchStopsAtMovedKey(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_CLUSTER_ADDRS"))
	l := bouncer.Limit{Name: "gcra", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Hour, Burst: 3}
	prefix := freshPrefix()
	owner := func(key string) string {
		hash, _ := redisstore.StateOf(prefix, l, key)
		return clusterOwner(t, c, redisstore.KeySlot(hash))
	}
	s := newStore(t, c, redisstore.Options{Prefix: prefix})
	// Two keys on one node, then one on another, then one on the first.
	var here, there []string
	first := ""
	for i := 0; len(here) < 3 || len(there) < 1; i++ {
		k := fmt.Sprintf("stop-%d", i)
		switch n := owner(k); {
		case first == "":
			first, here = n, append(here, k)
		case n == first && len(here) < 3:
			here = append(here, k)
		case n != first && len(there) < 1:
			there = append(there, k)
		}
	}
	order := []string{here[0], here[1], there[0], here[2]}
	reqs := make([]bouncer.Request, len(order))
	for i, k := range order {
		reqs[i] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: k, Limits: []bouncer.Limit{l}}}, Cost: 1}
	}
	keys, args, err := redisstore.ClusterBatchCall(s, reqs)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := redisstore.ExecScript(context.Background(), c, keys, args).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	if len(reply) != 2 {
		t.Fatalf("reply of %d elements, want the checks' packed replies and the error", len(reply))
	}
	packed, _ := reply[0].ToString()
	if len(packed) != 2*redisstore.PackedReplyLen {
		t.Fatalf("packed replies of %d bytes, want two checks' (%d)", len(packed), 2*redisstore.PackedReplyLen)
	}
	for i := range 2 {
		if ok := packed[i*redisstore.PackedReplyLen]; ok != 1 {
			t.Errorf("check %d: allowed %d, want 1", i, ok)
		}
	}
	if msg, _ := reply[1].ToString(); !strings.Contains(msg, "non local key") {
		t.Errorf("stopped with %q, want the Cluster's error for a key of another node", msg)
	}
	// The checks from the moved key on changed nothing: each key still
	// has its whole burst but what its first check took.
	for i, k := range order {
		d, err := s.Check(context.Background(), reqs[i])
		if err != nil {
			t.Fatal(err)
		}
		want := int64(1) // 3 - this check - the batch's
		if i >= 2 {
			want = 2 // the batch did not reach it
		}
		if !d.Allowed || d.Remaining != want {
			t.Errorf("key %s after the batch: %+v, want allowed with %d remaining", k, d, want)
		}
	}
}

// clusterOwner returns the address of the master that serves slot, as
// CLUSTER SLOTS says.
func clusterOwner(t *testing.T, c rueidis.Client, slot uint16) string {
	t.Helper()
	ranges, err := c.Do(context.Background(), c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ranges {
		e, _ := r.ToArray()
		lo, _ := e[0].AsInt64()
		hi, _ := e[1].AsInt64()
		if int64(slot) < lo || int64(slot) > hi {
			continue
		}
		m, _ := e[2].ToArray()
		host, _ := m[0].ToString()
		port, _ := m[1].AsInt64()
		return fmt.Sprintf("%s:%d", host, port)
	}
	t.Fatalf("no master serves slot %d", slot)
	return ""
}

// With a map of slots that puts every key on one node, checks go out in
// batches that stop at the first key of another node and send the rest on
// their own: every key still admits exactly its capacity, and the store
// reads the Cluster's map again.
func TestClusterBatchesWithWrongSlotMap(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_CLUSTER_ADDRS"))
	s := newStore(t, c, redisstore.Options{})
	l := bouncer.Limit{Name: "fw", Algorithm: bouncer.FixedWindow, Rate: 5, Period: 24 * time.Hour}
	const keys, workers, tries = 32, 4, 4
	allowed := make([]atomic.Int64, keys)
	stop := make(chan struct{})
	var misplacer sync.WaitGroup
	misplacer.Go(func() {
		for {
			redisstore.MisplaceSlots(s)
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	var wg sync.WaitGroup
	for k := range keys {
		for range workers {
			wg.Go(func() {
				req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: fmt.Sprintf("wrong-map-%d", k), Limits: []bouncer.Limit{l}}}, Cost: 1}
				for range tries {
					d, err := s.Check(context.Background(), req)
					if err != nil || d.Degraded {
						t.Errorf("key %d: %+v, %v", k, d, err)
						return
					}
					if d.Allowed {
						allowed[k].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	misplacer.Wait()
	for k := range allowed {
		if n := allowed[k].Load(); n != 5 {
			t.Errorf("key %d: %d allowed, want 5", k, n)
		}
	}
	if st := s.Stats(); st.Rerouted == 0 {
		t.Errorf("no check was sent again on its own (%+v): the wrong map was never used", st)
	}
	// Batches of keys of several nodes after the map was last misplaced
	// find it wrong, and the store reads it again.
	rs := make([]bouncer.Request, 12)
	for i := range rs {
		rs[i] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: fmt.Sprintf("wrong-map-last-%d", i), Limits: []bouncer.Limit{l}}}, Cost: 1}
	}
	ds, errs := make([]bouncer.Decision, len(rs)), make([]error, len(rs))
	for range 20 {
		if redisstore.SlotMapNodes(s) >= 3 {
			return
		}
		s.CheckEach(context.Background(), rs, ds, errs)
		for i, err := range errs {
			if err != nil || ds[i].Degraded {
				t.Fatalf("check %d: %+v, %v", i, ds[i], err)
			}
		}
	}
	t.Errorf("the store's map names %d nodes after batches found it wrong, want the Cluster's 3 masters", redisstore.SlotMapNodes(s))
}

// On a Cluster, a check queues in the lane of the node that serves its key
// (by the store's map of slots), so that a batch holds what queued for one
// node: the keys of one node share a lane, and the Cluster's masters, fewer
// than the lanes, each have their own.
func TestClusterLanesFollowNodes(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_CLUSTER_ADDRS"))
	l := bouncer.Limit{Name: "gcra", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Hour, Burst: 3}
	prefix := freshPrefix()
	s := newStore(t, c, redisstore.Options{Prefix: prefix})
	redisstore.ReadSlots(s)
	lanes := map[string]map[int]bool{} // node: the lanes of its keys
	for i := range 64 {
		k := fmt.Sprintf("lane-%d", i)
		hash, _ := redisstore.StateOf(prefix, l, k)
		node := clusterOwner(t, c, redisstore.KeySlot(hash))
		lane, err := redisstore.LaneOf(s, k, l)
		if err != nil {
			t.Fatal(err)
		}
		if lanes[node] == nil {
			lanes[node] = map[int]bool{}
		}
		lanes[node][lane] = true
	}
	if len(lanes) != 3 {
		t.Fatalf("64 keys on %d nodes, want the 3 masters", len(lanes))
	}
	owner := map[int]string{}
	for node, ls := range lanes {
		if len(ls) != 1 {
			t.Errorf("keys of %s in lanes %v, want one", node, ls)
		}
		for lane := range ls {
			if o, ok := owner[lane]; ok {
				t.Errorf("lane %d serves %s and %s, want a lane per master", lane, o, node)
			}
			owner[lane] = node
		}
	}
}
