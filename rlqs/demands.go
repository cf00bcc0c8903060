package rlqs

import (
	"context"
	"sync"
	"time"
)

// Demands keeps the demand every client reports for every bucket, so
// that the servers sharing it divide a limit by the same figures. A
// *redisstore.Store is one, shared by every instance on the same Redis.
type Demands interface {
	// ShareDemand records client's demand for bucket (requests a
	// second) for ttl, and returns the demand of every client of bucket
	// whose record has not expired, client's own included.
	ShareDemand(ctx context.Context, bucket, client string, demand float64, ttl time.Duration) (map[string]float64, error)

	// ForgetDemand drops client's demand for bucket.
	ForgetDemand(ctx context.Context, bucket, client string) error
}

// LocalDemands keeps demands in memory, for the clients of one server.
// It is safe for concurrent use.
type LocalDemands struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]map[string]demand
	calls   int
}

type demand struct {
	rate  float64
	until time.Time
}

// NewLocalDemands returns an empty LocalDemands on the clock now
// (time.Now when nil).
func NewLocalDemands(now func() time.Time) *LocalDemands {
	if now == nil {
		now = time.Now
	}
	return &LocalDemands{now: now, buckets: map[string]map[string]demand{}}
}

// ShareDemand implements Demands.
func (d *LocalDemands) ShareDemand(_ context.Context, bucket, client string, rate float64, ttl time.Duration) (map[string]float64, error) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.calls++; d.calls%4096 == 0 {
		d.sweep(now) // buckets nobody reports any more
	}
	cs := d.buckets[bucket]
	if cs == nil {
		cs = map[string]demand{}
		d.buckets[bucket] = cs
	}
	cs[client] = demand{rate: rate, until: now.Add(ttl)}
	out := make(map[string]float64, len(cs))
	for c, v := range cs {
		if !now.Before(v.until) {
			delete(cs, c)
			continue
		}
		out[c] = v.rate
	}
	return out, nil
}

// ForgetDemand implements Demands.
func (d *LocalDemands) ForgetDemand(_ context.Context, bucket, client string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cs := d.buckets[bucket]; cs != nil {
		delete(cs, client)
		if len(cs) == 0 {
			delete(d.buckets, bucket)
		}
	}
	return nil
}

func (d *LocalDemands) sweep(now time.Time) {
	for b, cs := range d.buckets {
		for c, v := range cs {
			if !now.Before(v.until) {
				delete(cs, c)
			}
		}
		if len(cs) == 0 {
			delete(d.buckets, b)
		}
	}
}
