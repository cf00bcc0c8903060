package bench

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/redisstore"
)

// BenchmarkGatewayPath times the parts of one caller's requests through
// the gateway, to find where a Redis-backed request's time goes: the
// request as its caller sees it (request-p50-µs), the gateway's
// ServeHTTP (serve-p50-µs), the store's Check as the gateway calls it
// (check-p50-µs) and the gateway's round trip to the upstream
// (upstream-p50-µs), each the median over b.N requests made one after
// another. The stores:
//
//	memory        memstore.New at its defaults
//	redis         redisstore.New at its defaults on BOUNCER_REDIS_ADDR
//	memory+busy   the memory store after 60 µs of busy work in its Check
//	memory+ping   the memory store after one Redis PING in its Check
//
// The last two tell a wait from work of the same length. It also reports,
// as check-alone-p50-µs, the Redis store's Check made in a loop of its
// own, outside any request. docs/benchmarks.md ("The Redis path at one
// caller") reads them. Skipped without BOUNCER_REDIS_ADDR.
func BenchmarkGatewayPath(b *testing.B) {
	addrs := redisAddrs(b, redisTopologies[0])
	token := gwToken(b)
	rs, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption(addrs), Prefix: "bouncer-" + runID + "-path", Timeout: smokeTimeout()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rs.Close() })
	ms := memstore.New(memstore.Options{})
	b.Cleanup(func() { ms.Close() })
	c, err := rueidis.NewClient(redisstore.ClientOption(addrs))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	for _, s := range []struct {
		name  string
		store bouncer.Limiter
	}{{"memory", ms}, {"redis", rs}, {"memory+busy", busyFirst{ms}}, {"memory+ping", pingFirst{ms, c}}} {
		b.Run("store="+s.name, func(b *testing.B) {
			up := startGwUpstream(b, mwOK)
			check := &partTimer{Limiter: s.store}
			rt := &timedTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
			var serve partTimes
			g := newGatewayOver(b, up.url, check, rt)
			url := gwServe(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t0 := time.Now()
				g.ServeHTTP(w, r)
				serve.add(time.Since(t0))
			})) + gwPath
			clients, _ := gwClients(b, 1)
			var req partTimes
			for range 100 { // connections opened, pools filled
				if _, err := gwGet(clients[0], url, token); err != nil {
					b.Fatal(err)
				}
			}
			serve.reset()
			check.reset()
			rt.reset()
			for b.Loop() {
				t0 := time.Now()
				if _, err := gwGet(clients[0], url, token); err != nil {
					b.Fatal(err)
				}
				req.add(time.Since(t0))
			}
			b.ReportMetric(req.p50(), "request-p50-µs")
			b.ReportMetric(serve.p50(), "serve-p50-µs")
			b.ReportMetric(check.p50(), "check-p50-µs")
			b.ReportMetric(rt.p50(), "upstream-p50-µs")
		})
	}
	b.Run("store=redis-alone", func(b *testing.B) {
		lim := []bouncer.Limit{{Name: "hour", Algorithm: bouncer.TokenBucket, Rate: gwLimit, Period: time.Hour, Burst: gwLimit}}
		var t partTimes
		for b.Loop() {
			t0 := time.Now()
			d, err := rs.Check(context.Background(), bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "alone", Limits: lim}}, Cost: 1})
			if err != nil || !d.Allowed || d.Degraded {
				b.Fatalf("check alone: %+v, %v; want allowed by Redis", d, err)
			}
			t.add(time.Since(t0))
		}
		b.ReportMetric(t.p50(), "check-alone-p50-µs")
	})
}

// partTimes collects durations from any goroutine.
type partTimes struct {
	mu sync.Mutex
	d  []time.Duration
}

func (p *partTimes) add(d time.Duration) {
	p.mu.Lock()
	p.d = append(p.d, d)
	p.mu.Unlock()
}

func (p *partTimes) reset() {
	p.mu.Lock()
	p.d = nil
	p.mu.Unlock()
}

// p50 is the median in µs.
func (p *partTimes) p50() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.d) == 0 {
		return 0
	}
	slices.Sort(p.d)
	return micros(p.d[len(p.d)/2])
}

// partTimer times its Limiter's checks.
type partTimer struct {
	bouncer.Limiter
	partTimes
}

func (t *partTimer) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	t0 := time.Now()
	d, err := t.Limiter.Check(ctx, r)
	t.add(time.Since(t0))
	return d, err
}

// timedTransport times its round trips.
type timedTransport struct {
	base http.RoundTripper
	partTimes
}

func (t *timedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t0 := time.Now()
	resp, err := t.base.RoundTrip(r)
	t.add(time.Since(t0))
	return resp, err
}

// busyFirst works 60 µs before each check, without waiting.
type busyFirst struct{ bouncer.Limiter }

func (s busyFirst) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	for t0 := time.Now(); time.Since(t0) < 60*time.Microsecond; {
	}
	return s.Limiter.Check(ctx, r)
}

// pingFirst makes one Redis PING before each check: a round trip without
// the store's work and Lua.
type pingFirst struct {
	bouncer.Limiter
	c rueidis.Client
}

func (s pingFirst) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	// With a deadline, as the store's calls have one: rueidis then
	// reads the answer on this goroutine, as it does for the store.
	ctx, cancel := context.WithTimeout(ctx, redisstore.DefaultTimeout)
	defer cancel()
	if err := s.c.Do(ctx, s.c.B().Ping().Build()).Error(); err != nil {
		return bouncer.Decision{}, err
	}
	return s.Limiter.Check(ctx, r)
}
