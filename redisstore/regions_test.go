//go:build unix

package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/internal/linkproxy"
	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/store"
)

// Regions on real Redis through real links (docs/regions.md): three
// regions on loopback, each with a redis-server of its own that the test
// starts (and may kill), and two hybrid limiters, each with a store of
// its own to its region's Redis. An instance's peers are stores to the
// other regions' Redis, each through a linkproxy of its own directed
// link (region to region) that adds 25 ms and up to 50 ms of jitter each
// way: round trips of 50 to 150 ms, which the test can cut. The limiters
// run as a service runs them, on the real clock with their own ticker.

// regionNames are the test's regions, in the order the limiters sort
// their peers.
var regionNames = [3]string{"ap", "eu", "us"}

// regionLimit is the global limit the regions share.
var regionLimit = bouncer.Limit{Name: "g", Algorithm: bouncer.FixedWindow, Rate: 600, Period: time.Second, Mode: bouncer.Async}

// regionLinkTimeout is the deadline of the peers' stores: a call across
// a region's link needs one above the link's round trip (150 ms at
// most here, more on a loaded machine), which the default of 50 ms is
// not.
const regionLinkTimeout = time.Second

// regionRedis is a region's private redis-server on a loopback port
// above 20000, which the test kills and starts again on the same port.
type regionRedis struct {
	port int
	dir  string
	srv  *redistest.Server // nil until started
}

// startRegionRedis starts a server on a free port and kills it when t
// ends.
func startRegionRedis(t *testing.T) *regionRedis {
	t.Helper()
	failureRequireRedis(t)
	r := &regionRedis{dir: t.TempDir()}
	t.Cleanup(r.kill)
	for attempt := 0; ; attempt++ {
		r.port = regionFreePort(t)
		err := r.start()
		if err == nil {
			return r
		}
		if attempt == 4 {
			t.Fatal(err)
		}
	}
}

// regionFreePort hands out a port from 30000 that nothing listens on and
// that this test binary has not handed out.
func regionFreePort(t *testing.T) int {
	t.Helper()
	failurePortsMu.Lock()
	defer failurePortsMu.Unlock()
	for range 100 {
		if p := 30000 + rand.IntN(10000); portFree(p) {
			failurePortsUse[p] = true
			return p
		}
	}
	t.Fatal("no free port for a region's Redis")
	return 0
}

func (r *regionRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// start starts the server on r.port and returns once it accepts
// connections.
func (r *regionRedis) start() error {
	srv, err := redistest.StartServer(r.port, r.dir)
	if err != nil {
		return err
	}
	r.srv = srv
	return nil
}

// kill kills the server (SIGKILL: a crash) and waits for it to exit.
func (r *regionRedis) kill() {
	if r.srv != nil {
		r.srv.Kill()
	}
}

// regionBucket is the global async token bucket the regions share in
// the bucket subtests: charged in every region with the others'
// admissions (docs/regions.md).
var regionBucket = bouncer.Limit{Name: "b", Algorithm: bouncer.TokenBucket, Rate: 600, Period: time.Second, Burst: 600, Mode: bouncer.Async}

// regions is the three regions, their links, and their instances.
type regions struct {
	redis []*regionRedis
	links map[[2]int]*linkproxy.Proxy // [from, to]
	ins   [3][2]*hybrid.Limiter
	limit bouncer.Limit // the limit run checks: regionLimit unless set
}

// newRegions starts the regions' servers, links and instances, whose
// shares live ttl in the other regions' stores. All the stores share one
// prefix: a region's instances and the others' relays meet in its keys.
func newRegions(t *testing.T, ttl time.Duration) *regions {
	t.Helper()
	w := &regions{links: map[[2]int]*linkproxy.Proxy{}, limit: regionLimit}
	for range regionNames {
		w.redis = append(w.redis, startRegionRedis(t))
	}
	for from := range regionNames {
		for to := range regionNames {
			if from == to {
				continue
			}
			p, err := linkproxy.New(w.redis[to].addr(), linkproxy.Options{Delay: 25 * time.Millisecond, Jitter: 50 * time.Millisecond, Seed: uint64(3*from + to)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			w.links[[2]int{from, to}] = p
		}
	}
	prefix := freshPrefix()
	peers := w.peerStores(t, prefix)
	for r, name := range regionNames {
		for i := range w.ins[r] {
			own := newStore(t, newClient(t, []string{w.redis[r].addr()}), redisstore.Options{Prefix: prefix})
			h := hybrid.New(own, nil, hybrid.Options{Region: name, Peers: peers[r][i], RegionTTL: ttl})
			t.Cleanup(func() { h.Close() })
			w.ins[r][i] = h
		}
	}
	return w
}

// peerStores makes each instance's stores of the other regions, through
// their links, all at once: connecting takes a few round trips of a
// link each.
func (w *regions) peerStores(t *testing.T, prefix string) (peers [3][2]map[string]store.Sharer) {
	t.Helper()
	type made struct {
		r, i  int
		other string
		c     rueidis.Client
		s     *redisstore.Store
		err   error
	}
	out := make(chan made)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	n := 0
	for r := range regionNames {
		for i := range peers[r] {
			peers[r][i] = map[string]store.Sharer{}
			for o, other := range regionNames {
				if o == r {
					continue
				}
				n++
				go func() {
					m := made{r: r, i: i, other: other}
					m.c, m.err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{w.links[[2]int{r, o}].Addr()}, DisableCache: true})
					if m.err == nil {
						o := redisstore.Options{Prefix: prefix, Timeout: regionLinkTimeout, Logger: logger.With("region", other)}
						redisstore.UseClient(&o, m.c)
						m.s, m.err = redisstore.New(o)
					}
					out <- m
				}()
			}
		}
	}
	var errs []error
	var clients []rueidis.Client
	var stores []*redisstore.Store
	// Closing a client waits for a round trip of its link: all at once.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range stores {
			s.Close()
		}
		for _, c := range clients {
			wg.Go(c.Close)
		}
		wg.Wait()
	})
	for range n {
		m := <-out
		if m.c != nil {
			clients = append(clients, m.c)
		}
		if m.err != nil {
			errs = append(errs, fmt.Errorf("%s's store of %s: %w", regionNames[m.r], m.other, m.err))
			continue
		}
		stores = append(stores, m.s)
		peers[m.r][m.i][m.other] = m.s
	}
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	return peers
}

// partition cuts region r off from the others, both ways, or heals it.
func (w *regions) partition(r int, cut bool) {
	for k, p := range w.links {
		if k[0] == r || k[1] == r {
			if cut {
				p.Partition()
			} else {
				p.Heal()
			}
		}
	}
}

// regionCounts is what a run admitted per window, in all and per region,
// and how many of each region's decisions were degraded.
type regionCounts struct {
	rate     int64 // the limit's, a window
	total    []int64
	byRegion [][3]int64
	degraded [][3]int64
}

// run offers a seeded open-loop load of one global hot key at load times
// its rate for the given number of windows, from the start of the
// current one (window 0, partial). A ticker paces it: each tick makes the
// checks due by then, however late it comes, so a slow tick does not
// thin the load. weights(win) is how the checks are spread over the
// regions (evenly over a region's instances); each(win), if not nil, is
// called as the load enters window win. A check is counted in the window
// its answer came back in: one whose answer crossed a window's edge is
// counted in the later window, where the limiter may have decided it in
// the earlier one.
func (w *regions) run(t *testing.T, load float64, windows int, seed uint64, weights func(win int) []float64, each func(win int)) regionCounts {
	t.Helper()
	l := w.limit
	rng := rand.New(rand.NewPCG(seed, 37))
	c := regionCounts{rate: l.Rate, total: make([]int64, windows), byRegion: make([][3]int64, windows), degraded: make([][3]int64, windows)}
	start := time.Now().Truncate(l.Period)
	begin := time.Now()
	perSecond := float64(l.Rate) * load / l.Period.Seconds()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	made, last := 0, -1
	for range tick.C {
		now := time.Now()
		win := int(now.Sub(start) / l.Period)
		if win >= windows {
			return c
		}
		if win != last && each != nil {
			each(win)
		}
		last = win
		for due := int(now.Sub(begin).Seconds() * perSecond); made < due; made++ {
			r := pickShare(rng, weights(win))
			d, err := w.ins[r][rng.IntN(2)].Check(context.Background(), hybridRequest("hot", 1, l))
			if err != nil {
				t.Fatalf("check in %s: %v", regionNames[r], err)
			}
			at := int(time.Since(start) / l.Period)
			if at >= windows {
				break
			}
			if d.Allowed {
				c.total[at]++
				c.byRegion[at][r]++
			}
			if d.Degraded {
				c.degraded[at][r]++
			}
		}
	}
	return c
}

// The bounds. Over a link of 25 to 75 ms one way, a region learns what
// the others admitted that much late, and the contended part of a window
// (at three times the rate, the whole limit is asked for in its first
// third) is divided on what was true then: a single window can pass the
// issue's 1.1 times (20 of 405 windows did, up to 1.21 times, before an
// instance held for another region what it admits at its pace while its
// news is old; 0 of the 40 linked windows of four runs since, at most
// 1.07 times). So the bounds hold the mean of a phase's windows:
// 1.1 times the limit while every region hears the others, 1.2 times
// during a partition; and every window is held to 1.2 times, which a
// region deciding alone (1.6 times and more) breaks.
const (
	regionMean          = 1.1
	regionPartitionMean = 1.2
	regionWindowCap     = 1.2
)

// within fails t unless the windows wins admit at most mean times the
// limit over them, and each at most regionWindowCap times it.
func (c regionCounts) within(t *testing.T, mean float64, wins ...int) {
	t.Helper()
	sum := int64(0)
	for _, win := range wins {
		sum += c.total[win]
		if float64(c.total[win]) > regionWindowCap*float64(c.rate) {
			t.Errorf("window %d admitted %d (%v by region), over %.1f × %d", win, c.total[win], c.byRegion[win], regionWindowCap, c.rate)
		}
	}
	n := float64(len(wins))
	if float64(sum) > mean*n*float64(c.rate) {
		t.Errorf("windows %v admitted %.1f each on average, over %.1f × %d", wins, float64(sum)/n, mean, c.rate)
	}
}

// span is the windows from first to last.
func span(first, last int) []int {
	var wins []int
	for win := first; win <= last; win++ {
		wins = append(wins, win)
	}
	return wins
}

func (c regionCounts) log(t *testing.T) {
	t.Helper()
	ratios := make([]string, len(c.total))
	for win, n := range c.total {
		ratios[win] = strconv.FormatFloat(float64(n)/float64(c.rate), 'f', 2, 64)
	}
	t.Logf("per window: %v (× the limit: %v); by region %v: %v; degraded: %v", c.total, ratios, regionNames, c.byRegion, c.degraded)
}

// heard fails t unless h's Regions report every region, h's own first,
// and each other one heard from less than maxAge ago.
func heard(t *testing.T, h *hybrid.Limiter, own int, maxAge time.Duration) {
	t.Helper()
	rs := h.Regions()
	if len(rs) != len(regionNames) || rs[0].Region != regionNames[own] {
		t.Fatalf("Regions() = %+v, want %s first and every region", rs, regionNames[own])
	}
	for _, s := range rs[1:] {
		if s.Age < 0 || s.Age >= maxAge {
			t.Errorf("Regions() of %s: %s heard from %v ago, want under %v: %+v", regionNames[own], s.Region, s.Age, maxAge, rs)
		}
	}
}

// regionLinked is the most a linked region's shares may be old: an
// exchange interval and a link's round trip, with room for a loaded
// machine.
const regionLinked = 2 * time.Second

func evenRegions(int) []float64 { return []float64{1.0 / 3, 1.0 / 3, 1.0 / 3} }

// skewedRegions gives us 60 % of the load.
func skewedRegions(int) []float64 { return []float64{0.2, 0.2, 0.6} }

// TestRegions runs three regions on real Redis through real links, their
// load three times the global limit.
func TestRegions(t *testing.T) {
	withMode := func(m bouncer.Mode) bouncer.Limit {
		l := regionLimit
		l.Mode = m
		return l
	}
	t.Run("steady", func(t *testing.T) { testRegionsSteady(t, regionLimit) })
	t.Run("partition", func(t *testing.T) { testRegionsPartition(t, regionLimit) })
	t.Run("partition-past-ttl", testRegionsPartitionPastTTL)
	t.Run("redis-killed", testRegionsRedisKilled)
	// Strict and lease inside each region: the region's Redis decides,
	// each instance held to its share of the global limit.
	t.Run("steady-strict", func(t *testing.T) { testRegionsSteady(t, withMode(bouncer.Strict)) })
	t.Run("steady-lease", func(t *testing.T) { testRegionsSteady(t, withMode(bouncer.Lease)) })
	t.Run("partition-strict", func(t *testing.T) { testRegionsPartition(t, withMode(bouncer.Strict)) })
	// An async token bucket: each region's Redis charged with the
	// others' admissions, the regions sharing what it has by demand.
	t.Run("steady-bucket", func(t *testing.T) { testRegionsSteady(t, regionBucket) })
	t.Run("partition-bucket", func(t *testing.T) { testRegionsPartition(t, regionBucket) })
	// A strict or lease bucket: decided by its region's Redis on its own
	// state, each instance held to its share of the key's ledger, which
	// every region's admissions are charged to.
	bucketIn := func(m bouncer.Mode) bouncer.Limit {
		l := regionBucket
		l.Mode = m
		return l
	}
	t.Run("steady-bucket-strict", func(t *testing.T) { testRegionsSteady(t, bucketIn(bouncer.Strict)) })
	t.Run("steady-bucket-lease", func(t *testing.T) { testRegionsSteady(t, bucketIn(bouncer.Lease)) })
	t.Run("partition-bucket-strict", func(t *testing.T) { testRegionsPartition(t, bucketIn(bouncer.Strict)) })
}

// Spread evenly for three windows after two to join, then moving from
// region to region window by window (80 % in one): the windows after the
// first two admit at most 1.1 times the limit over them, and, while the
// load moves (most of it in one region, which divides it inside its own
// Redis), each at most 1.1 times it; the region the load moved to admits
// at least half the limit from the second window on, not the third it
// would hold without the others' shares.
func testRegionsSteady(t *testing.T, l bouncer.Limit) {
	w := newRegions(t, hybrid.DefaultRegionTTL)
	w.limit = l
	moving := func(win int) []float64 {
		if win < 5 {
			return evenRegions(win)
		}
		ws := []float64{0.1, 0.1, 0.1}
		ws[win%3] = 0.8
		return ws
	}
	c := w.run(t, 3, 8, 1, moving, nil)
	c.log(t)
	c.within(t, regionMean, span(2, 7)...)
	for win := 5; win < len(c.total); win++ {
		if float64(c.total[win]) > regionMean*float64(l.Rate) {
			t.Errorf("window %d, the load moving, admitted %d (%v by region), over %.1f × %d", win, c.total[win], c.byRegion[win], regionMean, l.Rate)
		}
	}
	// At three times the rate, the others ask for 30 % of the limit each:
	// the busy region's max-min share is 40 %, which a window's leftover,
	// split half by demand, brings over half.
	least := 0.5
	if l.Algorithm != bouncer.FixedWindow {
		least = 0.35
	}
	for win := 6; win < len(c.total); win++ {
		if busy := c.byRegion[win][win%3]; float64(busy) < least*float64(l.Rate) {
			t.Errorf("window %d: %s, with 80 %% of the load, admitted %d, want at least %.0f %% of the limit", win, regionNames[win%3], busy, 100*least)
		}
	}
	for r := range regionNames {
		heard(t, w.ins[r][0], r, regionLinked)
	}
}

// A region with 60 % of the load (us) cut off, all its links both ways,
// for four windows, within a TTL of 10 s: each side keeps the other's
// last share, so the windows admit at most 1.2 times the limit over the
// partition (the window of the heal included), and us keeps most of its
// share (over 40 % of the limit, where its static share is a third);
// the windows before it and from the second after the heal admit at
// most 1.1 times the limit over them.
func testRegionsPartition(t *testing.T, l bouncer.Limit) {
	w := newRegions(t, 10*time.Second)
	w.limit = l
	// Windows 0-2 joined, 3-6 us cut off, healed as window 7 starts.
	c := w.run(t, 3, 10, 2, skewedRegions, func(win int) {
		switch win {
		case 3:
			w.partition(2, true)
		case 7:
			w.partition(2, false)
		}
	})
	c.log(t)
	c.within(t, regionMean, 2, 8, 9)
	c.within(t, regionPartitionMean, span(3, 7)...)
	// A bucket's share is max-min: with ap's and eu's demands over a
	// third of the rate each, us's last is a third (a window's is more:
	// what is left over is split half by demand).
	least := 0.4
	if l.Algorithm != bouncer.FixedWindow {
		least = 0.3
	}
	for win := 3; win <= 6; win++ {
		if us := c.byRegion[win][2]; float64(us) < least*float64(l.Rate) {
			t.Errorf("window %d: us cut off within the TTL admitted %d: its last share (over %.0f %% of %d) was not kept", win, us, 100*least, l.Rate)
		}
	}
	for r := range regionNames {
		heard(t, w.ins[r][1], r, regionLinked)
	}
}

// A region with 60 % of the load (us) cut off for longer than a TTL of
// 2 s: once its shares have expired in the others' stores and theirs in
// its own, neither side hears of the other (Regions reports an Age of
// -1), us holds itself to its static share, a third of the limit (but
// for async's own excess inside a region, 5 %), and the others hold it
// to that for it; the windows admit at most 1.2 times the limit over
// them throughout.
func testRegionsPartitionPastTTL(t *testing.T) {
	const ttl = 2 * time.Second
	w := newRegions(t, ttl)
	// Windows 0-1 joined, us cut off from window 2 on: its last shares
	// reach the others by the start of window 2 and expire within the
	// TTL, so from window 5 each side is past it.
	c := w.run(t, 3, 8, 3, skewedRegions, func(win int) {
		if win == 2 {
			heard(t, w.ins[2][0], 2, ttl)
			w.partition(2, true)
		}
	})
	c.log(t)
	c.within(t, regionPartitionMean, span(2, 7)...)
	// Held to its static share past the TTL: over the windows, within 5 %
	// of it; each window within the bound of a window (a loaded CI
	// machine once read 217 of 200 in one, 200 and 204 around it).
	static := float64(regionLimit.Rate) / float64(len(regionNames))
	sum := 0.0
	for win := 5; win < len(c.total); win++ {
		us := float64(c.byRegion[win][2])
		sum += us
		if us > regionWindowCap*static {
			t.Errorf("window %d: us cut off past the TTL admitted %.0f, over %.1f × its static share %.0f", win, us, regionWindowCap, static)
		}
	}
	if mean := sum / float64(len(c.total)-5); mean > 1.05*static {
		t.Errorf("us cut off past the TTL admitted %.0f a window, over its static share %.0f and 5 %%", mean, static)
	}
	for _, v := range []struct {
		h      *hybrid.Limiter
		region int
		lost   []int
	}{{w.ins[2][0], 2, []int{1, 2}}, {w.ins[0][0], 0, []int{2}}} {
		rs := v.h.Regions()
		if len(rs) != len(regionNames) {
			t.Errorf("%s's Regions() past the TTL: %+v, want every region", regionNames[v.region], rs)
			continue
		}
		for _, k := range v.lost {
			if rs[k].Age != -1 {
				t.Errorf("%s's Regions() past the TTL: %+v, want %s not heard of (Age -1)", regionNames[v.region], rs, rs[k].Region)
			}
		}
	}
}

// One region's Redis (ap's) killed for three windows, then started again
// on the same port, empty. ap's own instances cannot sync: they follow
// their limits' on_store_error, local by default, each admitting up to
// the whole limit on its own (degraded decisions), so ap admits what it
// is asked for and the windows are over the limit meanwhile, as
// docs/failures.md says of one region. The other regions go on, not
// degraded: they keep ap's last share for it (within the TTL) and admit
// two thirds of the limit (1.1 times that over the windows, 1.2 times in
// each). From two windows after the restart ap decides in its Redis
// again, not degraded, the others hear from it, and the windows before
// the kill and from then on admit at most 1.1 times the limit over
// them.
func testRegionsRedisKilled(t *testing.T) {
	w := newRegions(t, hybrid.DefaultRegionTTL)
	// Windows 0-2 joined, ap's Redis down in 3-5, started as 6 starts.
	c := w.run(t, 3, 12, 4, evenRegions, func(win int) {
		switch win {
		case 3:
			w.redis[0].kill()
		case 6:
			if err := w.redis[0].start(); err != nil {
				t.Fatal(err)
			}
		}
	})
	c.log(t)
	c.within(t, regionMean, 2, 8, 9, 10, 11)
	twoThirds, sum := float64(regionLimit.Rate)*2/3, int64(0)
	for win := 3; win <= 5; win++ {
		if d := c.degraded[win]; d[1] != 0 || d[2] != 0 || d[0] == 0 {
			t.Errorf("window %d, ap's Redis down: degraded decisions by region %v, want some in ap and none in eu and us", win, d)
		}
		others := c.byRegion[win][1] + c.byRegion[win][2]
		sum += others
		if float64(others) > regionWindowCap*twoThirds {
			t.Errorf("window %d, ap's Redis down: eu and us admitted %d, over %.1f × two thirds of %d", win, others, regionWindowCap, regionLimit.Rate)
		}
		if ap := c.byRegion[win][0]; ap > 2*regionLimit.Rate {
			t.Errorf("window %d, ap's Redis down: ap admitted %d, over its two instances' local limits", win, ap)
		}
	}
	if float64(sum) > 3*regionMean*twoThirds {
		t.Errorf("windows 3 to 5, ap's Redis down: eu and us admitted %.1f each on average, over %.1f × two thirds of %d", float64(sum)/3, regionMean, regionLimit.Rate)
	}
	for win := 8; win < len(c.total); win++ {
		if d := c.degraded[win]; d != [3]int64{} {
			t.Errorf("window %d, ap's Redis back: degraded decisions by region %v", win, d)
		}
	}
	for r := range regionNames {
		heard(t, w.ins[r][0], r, regionLinked)
	}
}
