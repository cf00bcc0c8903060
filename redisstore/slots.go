package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Which master serves each group's slot, as a Cluster last said
// (CLUSTER SLOTS, read when the map is older than slotMapAge or a breaker
// opened): it names the breaker a call answers to (nodes.go). rueidis
// routes every call by the Cluster's own map and follows MOVED and ASK,
// but tells no one which node it sent a call to (v1.0.79: its map of
// slots is private, and its errors do not name the node), so the store
// keeps this much of the map itself: one entry per group, since every
// key of a group shares the group's slot. A map behind the Cluster's only
// attributes a call to the wrong node's breaker until it is read again.

const (
	slotCount = 16384
	// slotMapAge is how long a map of slots serves before it is read
	// again; slotMapRetry how long after a failed read the next is tried.
	slotMapAge   = 5 * time.Second
	slotMapRetry = 100 * time.Millisecond
)

// slotMap is which master served each group's slot when it was read.
type slotMap struct {
	group []*breaker // per group, its master's; nil: none served its slot
	at    time.Time
}

// slots holds a store's map of a Cluster's slots.
type slots struct {
	cur      atomic.Pointer[slotMap]
	stale    atomic.Bool // a breaker opened: the map may be behind a failover
	mu       sync.Mutex  // one reader at a time
	failedAt time.Time   // under mu: the last failed read
}

// slotMap returns the store's map of slots (nil when there is none yet)
// and, if it is old or wrong, has a goroutine read it again, unless one
// does already or the last read failed less than slotMapRetry ago: the old
// map serves meanwhile.
func (s *Store) slotMap() *slotMap {
	m := s.slots.cur.Load()
	if s.slots.fresh(m) || !s.slots.mu.TryLock() {
		return m
	}
	if s.slots.fresh(s.slots.cur.Load()) || time.Since(s.slots.failedAt) < slotMapRetry {
		s.slots.mu.Unlock()
		return m
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.slots.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.breakers.ctx, preloadTimeout)
		defer cancel()
		nm, err := s.readSlots(ctx)
		if err != nil {
			s.slots.failedAt = time.Now()
			return
		}
		s.slots.stale.Store(false)
		s.slots.cur.Store(nm)
	}()
	return m
}

// refreshSlots reads the map of slots now, within preloadTimeout.
func (s *Store) refreshSlots() {
	ctx, cancel := context.WithTimeout(context.Background(), preloadTimeout)
	defer cancel()
	if nm, err := s.readSlots(ctx); err == nil {
		s.slots.stale.Store(false)
		s.slots.cur.Store(nm)
	}
}

// fresh reports whether m, the current map, serves without being read
// again: younger than slotMapAge, and not found wrong.
func (sl *slots) fresh(m *slotMap) bool {
	return m != nil && !sl.stale.Load() && time.Since(m.at) < slotMapAge
}

// readSlots reads the map of slots with CLUSTER SLOTS. Every master
// gets its breaker, serving a group or not, so that Health lists them
// all.
func (s *Store) readSlots(ctx context.Context) (*slotMap, error) {
	ranges, err := s.client.Do(ctx, s.client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, err
	}
	m := &slotMap{group: make([]*breaker, len(s.tags)), at: time.Now()}
	for _, r := range ranges {
		e, err := r.ToArray()
		if err != nil || len(e) < 3 {
			return nil, errors.New("malformed CLUSTER SLOTS reply")
		}
		lo, err1 := e[0].AsInt64()
		hi, err2 := e[1].AsInt64()
		master, err3 := e[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(master) < 2 || lo < 0 || hi >= slotCount || lo > hi {
			return nil, errors.New("malformed CLUSTER SLOTS reply")
		}
		host, _ := master[0].ToString()
		port, _ := master[1].AsInt64()
		b := s.breakers.get(host + ":" + strconv.FormatInt(port, 10))
		for g, tag := range s.tags {
			if slot := int64(keySlot(tag)); lo <= slot && slot <= hi {
				m.group[g] = b
			}
		}
	}
	return m, nil
}

// keySlot is the Cluster slot of key: CRC16 of its hash tag (or of the
// whole key without one) modulo the slot count.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[k]]
	}
	return crc % slotCount
}

// crc16Table is the table of CRC-16/XMODEM (polynomial 0x1021), the CRC
// that Redis Cluster hashes keys with.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
