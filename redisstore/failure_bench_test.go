//go:build unix

package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/redisstore"
)

// BenchmarkCheckRedisDown measures a check's latency while a private
// standalone Redis is down, with the default deadline
// (redisstore.DefaultTimeout) and breaker, under the allow and local
// policies:
//
//   - stopped: the server is shut down, so calls fail at once
//     (connection refused) until the breaker opens;
//   - frozen: the server is stopped with SIGSTOP, so calls hang until
//     their deadline; the breaker then answers at once, except for one
//     probe per OpenFor, which waits out the deadline again.
//
// Besides ns/op it reports the slowest and the 99th percentile check
// relative to the deadline, in ms ("max-over-deadline-ms",
// "p99-over-deadline-ms"; negative: within it). The target is a
// max-over-deadline-ms of at most 1; control/memstore, the same loop on
// the in-memory store, shows how much of a maximum is the machine's own
// scheduling noise. The serial runs make one check at a time; the
// parallel ones GOMAXPROCS at once.
//
// TestFailure/Standalone logs how long after Redis returns it decides
// checks again and full throughput is back.
func BenchmarkCheckRedisDown(b *testing.B) {
	pr := startPrivateRedis(b)
	addr := []string{fmt.Sprintf("127.0.0.1:%d", pr.port)}
	deadline := redisstore.DefaultTimeout
	policies := []bouncer.StoreErrorPolicy{bouncer.StoreErrorAllow, bouncer.StoreErrorLocal}
	modes := []struct {
		name          string
		down, restore func()
	}{
		{"stopped", func() { pr.node(b, "stop", pr.port) }, func() { pr.node(b, "start", pr.port) }},
		{"frozen", func() { pr.freeze(b, pr.port) }, func() { pr.resumeAll(b) }},
	}
	// The machine's own noise: the same loop on the in-memory store, whose
	// checks never wait for anything. A store's slowest check can be no
	// better than this one's.
	mem := memstore.New(memstore.Options{})
	b.Cleanup(func() { mem.Close() })
	control := failureRequest("bench", failurePerHour("hour", bouncer.MaxRate, bouncer.StoreErrorDefault))
	b.Run("control/memstore", func(b *testing.B) { benchLatency(b, mem, control, deadline, "in memory") })
	b.Run("control/memstore/parallel", func(b *testing.B) { benchLatencyParallel(b, mem, control, deadline, "in memory") })

	for _, m := range modes {
		// The stores connect while Redis is up; each keeps its breaker
		// through its benchmark's runs.
		stores := map[bouncer.StoreErrorPolicy]*redisstore.Store{}
		for _, p := range policies {
			stores[p] = newStore(b, newClient(b, addr), redisstore.Options{Timeout: deadline, OnStoreError: p})
		}
		m.down()
		for _, p := range policies {
			s := stores[p]
			// Local: a limit the local store never denies, so that every
			// check does the same work.
			r := failureRequest("bench", failurePerHour("hour", bouncer.MaxRate, bouncer.StoreErrorDefault))
			what := fmt.Sprintf("with Redis %s under %v", m.name, p)
			b.Run(m.name+"/"+p.String(), func(b *testing.B) { benchLatency(b, s, r, deadline, what) })
			b.Run(m.name+"/"+p.String()+"/parallel", func(b *testing.B) { benchLatencyParallel(b, s, r, deadline, what) })
		}
		m.restore()
	}
}

// benchLatency checks r with l b.N times, one at a time, and reports the
// latency; every check must be allowed, and degraded if l is a Redis
// store.
func benchLatency(b *testing.B, l bouncer.Limiter, r bouncer.Request, deadline time.Duration, what string) {
	_, isRedis := l.(*redisstore.Store)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		d, err := l.Check(context.Background(), r)
		lat = append(lat, time.Since(start))
		if err != nil || d.Degraded != isRedis || !d.Allowed {
			b.Fatalf("check %s: %+v, %v; want allowed (and degraded)", what, d, err)
		}
	}
	b.StopTimer()
	reportLatency(b, lat, deadline)
}

// benchLatencyParallel is benchLatency from GOMAXPROCS goroutines.
func benchLatencyParallel(b *testing.B, l bouncer.Limiter, r bouncer.Request, deadline time.Duration, what string) {
	_, isRedis := l.(*redisstore.Store)
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			d, err := l.Check(context.Background(), r)
			mine = append(mine, time.Since(start))
			if err != nil || d.Degraded != isRedis || !d.Allowed {
				b.Errorf("check %s: %+v, %v; want allowed (and degraded)", what, d, err)
				break
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	reportLatency(b, lat, deadline)
}

// reportLatency reports the slowest and the 99th percentile of lat
// relative to deadline.
func reportLatency(b *testing.B, lat []time.Duration, deadline time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	p99 := lat[(len(lat)*99)/100]
	slowest := lat[len(lat)-1]
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(slowest-deadline), "max-over-deadline-ms")
	b.ReportMetric(ms(p99-deadline), "p99-over-deadline-ms")
}
