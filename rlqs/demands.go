package rlqs

import (
	"context"
	"math"
	"sync"
	"time"
)

// Demands keeps the demand every client reports for every bucket, so
// that the servers sharing it divide a limit by the same figures. A
// *redisstore.Store is one, shared by every instance on the same Redis.
//
// Time is cut into epochs of one report interval each, numbered on the
// store's clock (the Unix time divided by the interval), so that every
// server sharing the store agrees on them. A bucket is divided once an
// epoch, by its demands as they stood when the epoch began: every
// server reading them during the epoch gets the same figures, whatever
// was recorded since.
type Demands interface {
	// RecordDemand records client's demand for bucket (requests a
	// second, +Inf for a client not measured yet), live for ttl, and
	// returns the epoch it was recorded in. It is the one store call of
	// most reports.
	RecordDemand(ctx context.Context, bucket, client string, demand float64, interval, ttl time.Duration) (epoch int64, err error)

	// ForgetDemand forgets client's demand for bucket from the next
	// epoch on (the current one's division keeps it).
	ForgetDemand(ctx context.Context, bucket, client string, interval time.Duration) error

	// DemandsAt returns the demand of every client of bucket as it stood
	// when epoch began: each client's latest demand recorded before
	// then, if still live then. A server calls it once an epoch per
	// bucket.
	DemandsAt(ctx context.Context, bucket string, epoch int64, interval time.Duration) (map[string]float64, error)

	// Claim takes up to amount of what the division of bucket in epoch
	// left unassigned (free, the same for every server) and returns
	// what it took; what all claims of the epoch took never exceeds
	// free. A negative amount gives some back (a client that leaves),
	// for clients that arrive later in the epoch. A claim of an epoch
	// that is over takes nothing.
	Claim(ctx context.Context, bucket string, epoch int64, free, amount float64) (float64, error)
}

// LocalDemands keeps demands in memory, for the clients of one server.
// It is safe for concurrent use.
type LocalDemands struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*localBucket
	records int // in buckets
	calls   int // since the last sweep
}

// localBucket is one bucket's records, and its claims of one epoch.
type localBucket struct {
	clients map[string]record
	claimed float64
	epoch   int64 // of claimed
}

// record is one client's demand: the latest recorded (in epoch), and the
// one before epoch began (as it stood then), each live until a Unix time
// in milliseconds (0: none, forgotten), as in the Redis store.
type record struct {
	epoch               int64
	cur, prev           float64
	curUntil, prevUntil int64
}

// NewLocalDemands returns an empty LocalDemands on the clock now
// (time.Now when nil).
func NewLocalDemands(now func() time.Time) *LocalDemands {
	if now == nil {
		now = time.Now
	}
	return &LocalDemands{now: now, buckets: map[string]*localBucket{}}
}

// epochOf is the epoch of t: its Unix time in milliseconds divided by
// interval's, as the Redis script computes it.
func epochOf(t time.Time, interval time.Duration) int64 {
	return t.UnixMilli() / max(interval.Milliseconds(), 1)
}

// RecordDemand implements Demands.
func (d *LocalDemands) RecordDemand(_ context.Context, bucket, client string, demand float64, interval, ttl time.Duration) (int64, error) {
	now := d.now()
	return d.record(now, bucket, client, demand, now.Add(ttl).UnixMilli(), interval), nil
}

// ForgetDemand implements Demands.
func (d *LocalDemands) ForgetDemand(_ context.Context, bucket, client string, interval time.Duration) error {
	d.record(d.now(), bucket, client, 0, 0, interval)
	return nil
}

// record records client's demand until until, in Unix ms (0: forgets
// it).
func (d *LocalDemands) record(now time.Time, bucket, client string, demand float64, until int64, interval time.Duration) int64 {
	e := epochOf(now, interval)
	d.mu.Lock()
	defer d.mu.Unlock()
	// Buckets nobody reports any more, swept once every record has
	// been written once since the last sweep (at least 4096 calls), so
	// that a sweep costs O(1) a call.
	if d.calls++; d.calls >= max(4096, d.records) {
		d.calls = 0
		d.sweep(now.UnixMilli())
	}
	b := d.bucket(bucket)
	r, ok := b.clients[client]
	if !ok {
		d.records++
	}
	if r.epoch < e {
		r.prev, r.prevUntil = r.cur, r.curUntil
	}
	r.epoch, r.cur, r.curUntil = e, demand, until
	b.clients[client] = r
	return e
}

// bucket is the bucket named name, made if need be.
func (d *LocalDemands) bucket(name string) *localBucket {
	b := d.buckets[name]
	if b == nil {
		b = &localBucket{clients: map[string]record{}}
		d.buckets[name] = b
	}
	return b
}

// DemandsAt implements Demands.
func (d *LocalDemands) DemandsAt(_ context.Context, bucket string, epoch int64, interval time.Duration) (map[string]float64, error) {
	now, start := d.now().UnixMilli(), epoch*max(interval.Milliseconds(), 1)
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.buckets[bucket]
	if b == nil {
		return map[string]float64{}, nil
	}
	out := make(map[string]float64, len(b.clients))
	for c, r := range b.clients {
		if dem, until := r.at(epoch); until > start {
			out[c] = dem
		}
		if r.curUntil <= now && r.prevUntil <= now {
			delete(b.clients, c)
			d.records--
		}
	}
	return out, nil
}

// at is r as it stood when epoch began.
func (r record) at(epoch int64) (float64, int64) {
	if r.epoch < epoch {
		return r.cur, r.curUntil
	}
	return r.prev, r.prevUntil
}

// Claim implements Demands.
func (d *LocalDemands) Claim(_ context.Context, bucket string, epoch int64, free, amount float64) (float64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.bucket(bucket)
	switch {
	case b.epoch > epoch:
		return 0, nil
	case b.epoch < epoch:
		b.epoch, b.claimed = epoch, 0
	}
	got := amount
	if amount > 0 {
		got = max(0, math.Min(amount, free-b.claimed))
	}
	b.claimed += got
	return got, nil
}

func (d *LocalDemands) sweep(now int64) {
	for name, b := range d.buckets {
		for c, r := range b.clients {
			if r.curUntil <= now && r.prevUntil <= now {
				delete(b.clients, c)
				d.records--
			}
		}
		if len(b.clients) == 0 {
			delete(d.buckets, name)
		}
	}
}
