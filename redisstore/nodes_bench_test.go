package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
)

// BenchmarkBreakerOf measures what finding a part's breaker costs on a
// Cluster, through the store's map of its groups' masters
// (docs/redis.md, "Which node's breaker").
func BenchmarkBreakerOf(b *testing.B) {
	s := &Store{cluster: true, tags: groupTags(DefaultGroups), prefix: "bouncer", buckets: DefaultBuckets}
	s.breakers = newBreakers(BreakerOptions{}, time.Now, nil)
	s.breakers.init("")
	m := &slotMap{at: time.Now()}
	for _, tag := range s.tags { // three masters, as redis-cli splits the slots
		m.group = append(m.group, s.breakers.get("10.0.0."+strconv.Itoa(int(keySlot(tag))*3/slotCount)+":6379"))
	}
	s.slots.cur.Store(m)
	lid := limitID(bouncer.Limit{Name: "minute", Algorithm: bouncer.GCRA, Rate: 100, Period: time.Minute, Burst: 100})
	ps := make([]part, 1024)
	for i := range ps {
		d := digestOf("user:"+strconv.Itoa(i), s.buckets)
		ps[i] = part{group: s.groupOf(d.bucket), refs: []ref{{rkey: s.hashKey(lid, d.bucket)}}}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := &ps[i%len(ps)]
		p.breaker = nil // each part finds its breaker once
		if s.breakerOf(p) == nil {
			b.Fatal("no breaker")
		}
		i++
	}
}
