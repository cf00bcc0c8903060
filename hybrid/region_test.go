package hybrid_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

// link is a way from one region to another region's store on a fake
// clock: what is sent arrives delay later, in order, or, while the link
// is cut, fails as a call that times out does.
type link struct {
	store.Sharer
	clock *storetest.Clock
	delay time.Duration

	mu      sync.Mutex
	cut     bool
	inbound []delivery
}

type delivery struct {
	at     time.Time
	ttl    time.Duration
	pairs  []bouncer.Request
	mine   []store.Share
	charge *bouncer.Request // a charge, not shares
}

// Charge charges the store across the link: later by its delay, or not
// at all if it is cut.
func (l *link) Charge(_ context.Context, r bouncer.Request) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return errors.New("link cut")
	}
	l.inbound = append(l.inbound, delivery{at: l.clock.Now().Add(l.delay), charge: &r})
	return nil
}

func (l *link) ExchangeShares(_ context.Context, ttl time.Duration, pairs []bouncer.Request, mine []store.Share) ([][]store.Share, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return nil, errors.New("link cut")
	}
	l.inbound = append(l.inbound, delivery{at: l.clock.Now().Add(l.delay), ttl: ttl, pairs: pairs, mine: append([]store.Share(nil), mine...)})
	return make([][]store.Share, len(pairs)), nil
}

// arrive delivers what is due, with the TTL it was sent with less its
// time on the way.
func (l *link) arrive() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for len(l.inbound) > 0 && !l.inbound[0].at.After(now) {
		d := l.inbound[0]
		l.inbound = l.inbound[1:]
		if d.charge != nil {
			if err := l.Sharer.(store.Charger).Charge(context.Background(), *d.charge); err != nil {
				panic(err)
			}
			continue
		}
		if _, err := l.Sharer.ExchangeShares(context.Background(), d.ttl-l.delay, d.pairs, d.mine); err != nil {
			panic(err)
		}
	}
}

func (l *link) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		l.inbound = nil // lost on the way
	}
}

// world is three regions of two instances each, every region with a
// store of its own, linked to the others' with a delay, on one fake
// clock.
type world struct {
	clock   *storetest.Clock
	regions []string
	stores  []*memstore.Store
	links   map[[2]int]*link // [from, to]
	ins     [][]*hybrid.Limiter
	next    [][]time.Time
}

func newWorld(t *testing.T, delay, ttl time.Duration) *world {
	t.Helper()
	w := &world{clock: storetest.NewClock(storetest.Start), regions: []string{"ap", "eu", "us"}, links: map[[2]int]*link{}}
	for range w.regions {
		ms := memstore.New(memstore.Options{Now: w.clock.Now})
		t.Cleanup(func() { ms.Close() })
		w.stores = append(w.stores, ms)
	}
	for r, name := range w.regions {
		peers := map[string]store.Sharer{}
		for o, other := range w.regions {
			if o != r {
				l := &link{Sharer: w.stores[o], clock: w.clock, delay: delay}
				w.links[[2]int{r, o}] = l
				peers[other] = l
			}
		}
		var ins []*hybrid.Limiter
		var next []time.Time
		for i := range 2 {
			h := hybrid.New(w.stores[r], nil, hybrid.Options{Now: w.clock.Now, Manual: true, Region: name, Peers: peers, RegionTTL: ttl})
			t.Cleanup(func() { h.Close() })
			ins = append(ins, h)
			next = append(next, w.clock.Now().Add(time.Duration(2*r+i+1)*shareInterval/6))
		}
		w.ins, w.next = append(w.ins, ins), append(w.next, next)
	}
	return w
}

// partition cuts region r off from the others, both ways, or heals it.
func (w *world) partition(r int, cut bool) {
	for k, l := range w.links {
		if k[0] == r || k[1] == r {
			l.setCut(cut)
		}
	}
}

// step moves the clock on by d, delivering and ticking on the way.
func (w *world) step(d time.Duration) {
	w.clock.Advance(d)
	for _, l := range w.links {
		l.arrive()
	}
	for r := range w.ins {
		for i, h := range w.ins[r] {
			for !w.clock.Now().Before(w.next[r][i]) {
				h.Tick(context.Background())
				w.next[r][i] = w.next[r][i].Add(shareInterval)
			}
		}
	}
}

// regionLoad runs a seeded stream of checks of one global hot key at
// load times its rate for the given number of windows; weights(window)
// is how the load is spread over the regions (evenly over a region's
// instances). It returns what was admitted per window, in all and per
// region.
func (w *world) run(t *testing.T, l bouncer.Limit, load float64, windows int, seed uint64, weights func(win int) []float64, each func(win int)) (total []int64, byRegion [][3]int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	mean := float64(l.Period) / (float64(l.Rate) * load)
	start := w.clock.Now()
	total, byRegion = make([]int64, windows), make([][3]int64, windows)
	last := -1
	for {
		w.step(time.Duration(rng.ExpFloat64() * mean))
		win := int(w.clock.Now().Sub(start) / l.Period)
		if win >= windows {
			return total, byRegion
		}
		if win != last && each != nil {
			each(win)
		}
		last = win
		r, x, ws := 0, rng.Float64(), weights(win)
		for r < len(ws)-1 && x >= ws[r] {
			x -= ws[r]
			r++
		}
		if check(t, w.ins[r][rng.IntN(2)], one("hot", 1, l)).Allowed {
			total[win]++
			byRegion[win][r]++
		}
	}
}

var globalWindow = bouncer.Limit{Name: "g", Algorithm: bouncer.FixedWindow, Rate: 300, Period: time.Second, Mode: bouncer.Async}

// Three regions 100 ms apart share a global fixed window offered three
// times its rate, spread evenly, and moving from one region to another
// window by window: every window after the first two admits at most 1.1
// times the limit, where each region limiting on its own admits up to
// three times it. So in every mode: async, and strict or lease inside
// each region, whose store decides as ever while each instance holds to
// its share.
func TestRegionsShareTheLimit(t *testing.T) {
	for _, mode := range []bouncer.Mode{bouncer.Async, bouncer.Strict, bouncer.Lease} {
		l := globalWindow
		l.Mode = mode
		t.Run(mode.String(), func(t *testing.T) { testRegionsShareTheLimit(t, l) })
	}
	// An async token bucket is global too: each region's store is
	// charged with the others' admissions, and the regions share what it
	// has by demand; its windows are seconds, the first two its burst.
	t.Run("bucket", func(t *testing.T) { testRegionsShareTheLimit(t, globalBucket) })
	for _, mode := range []bouncer.Mode{bouncer.Strict, bouncer.Lease} {
		l := globalBucket
		l.Mode = mode
		t.Run("bucket-"+mode.String(), func(t *testing.T) { testRegionsShareTheLimit(t, l) })
	}
}

var globalBucket = bouncer.Limit{Name: "b", Algorithm: bouncer.TokenBucket, Rate: 300, Period: time.Second, Burst: 300, Mode: bouncer.Async}

func testRegionsShareTheLimit(t *testing.T, l bouncer.Limit) {
	for _, spread := range []struct {
		name    string
		weights func(int) []float64
	}{
		{"even", func(int) []float64 { return []float64{1.0 / 3, 1.0 / 3, 1.0 / 3} }},
		{"moving", func(win int) []float64 {
			ws := []float64{0.1, 0.1, 0.1}
			ws[win%3] = 0.8
			return ws
		}},
	} {
		t.Run(spread.name, func(t *testing.T) {
			w := newWorld(t, 50*time.Millisecond, 10*time.Second)
			total, by := w.run(t, l, 3, 12, 7, spread.weights, nil)
			for win := 2; win < len(total); win++ {
				if float64(total[win]) > 1.1*float64(l.Rate) {
					t.Errorf("window %d admitted %d (%v by region), over 1.1 × %d", win, total[win], by[win], l.Rate)
				}
				if float64(total[win]) < 0.9*float64(l.Rate) {
					t.Errorf("window %d admitted %d (%v by region), under 0.9 × %d at three times the rate", win, total[win], by[win], l.Rate)
				}
			}
			t.Logf("per window: %v; by region: %v", total, by)
			rs := w.ins[0][0].Regions()
			if len(rs) != 3 || rs[0].Region != "ap" || rs[1].Age < 0 || rs[1].Age > time.Second {
				t.Errorf("Regions() = %+v, want ap first and the others heard from within a second", rs)
			}
		})
	}
}

// An async token bucket's region cut off for several seconds: every
// second at most 1.2 times the rate while it is, and 1.1 times from the
// heal; past the TTL, us is held to its static share, a third of the
// rate, each other region charging for it at that pace.
func TestRegionsBucketPartition(t *testing.T) {
	for _, mode := range []bouncer.Mode{bouncer.Async, bouncer.Strict, bouncer.Lease} {
		t.Run(mode.String(), func(t *testing.T) {
			l := globalBucket
			l.Mode = mode
			_, _, by := runPartition(t, l)
			for win := 7; win < 10; win++ {
				if us := by[win][2]; us > l.Rate/3+3 {
					t.Errorf("second %d, us cut off past the TTL admitted %d, over its static share %d", win, us, l.Rate/3)
				}
			}
			// Healed, us (60 % of the demand) has its max-min third again.
			for win := 11; win < 14; win++ {
				if us := by[win][2]; us < l.Rate/4 {
					t.Errorf("second %d, healed, us admitted %d, under a quarter of %d", win, us, l.Rate)
				}
			}
		})
	}
}

// runPartition runs l at three times its rate, 20/20/60 over ap, eu and
// us, with a TTL of 3 s: windows 0-2 joined; 3-9 us cut off, past the
// TTL from window 6; the link heals at the start of window 10. It fails
// t for a window after the first two over 1.1 times the limit, or 1.2
// times from the cut to the heal, and returns the world and what each
// window admitted, in all and by region.
func runPartition(t *testing.T, l bouncer.Limit) (w *world, total []int64, by [][3]int64) {
	t.Helper()
	w = newWorld(t, 50*time.Millisecond, 3*time.Second)
	skewed := func(int) []float64 { return []float64{0.2, 0.2, 0.6} }
	total, by = w.run(t, l, 3, 14, 9, skewed, func(win int) {
		switch win {
		case 3:
			w.partition(2, true)
		case 10:
			w.partition(2, false)
		}
	})
	t.Logf("per window: %v; by region: %v", total, by)
	for win := 2; win < len(total); win++ {
		bound := 1.1
		if win >= 3 && win <= 10 {
			bound = 1.2
		}
		if float64(total[win]) > bound*float64(l.Rate) {
			t.Errorf("window %d admitted %d (%v by region), over %.1f × %d", win, total[win], by[win], bound, l.Rate)
		}
	}
	return w, total, by
}

// The units an instance admits of an async bucket are charged to every
// other region's store, and what a cut link could not carry is charged
// when it heals, at most an interval's worth of the limit's rate (here
// one unit: 1 an hour), however much was admitted meanwhile.
func TestRegionsChargesCapped(t *testing.T) {
	w := newWorld(t, 50*time.Millisecond, 10*time.Second)
	l := bouncer.Limit{Name: "c", Algorithm: bouncer.TokenBucket, Rate: 1, Period: time.Hour, Burst: 10000, Mode: bouncer.Async}
	remaining := func(r int) int64 {
		d, err := w.stores[r].Check(context.Background(), bouncer.Request{Keys: one("k", 1, l).Keys, Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}
	admit := func(n int) {
		for range n {
			if !check(t, w.ins[0][0], one("k", 1, l)).Allowed {
				t.Fatal("a check far below the limit was denied")
			}
			w.step(2 * time.Millisecond)
		}
		for range 20 { // pushed, relayed, arrived
			w.step(50 * time.Millisecond)
		}
	}
	w.links[[2]int{0, 1}].setCut(true) // ap to eu
	admit(500)
	if ap, eu, us := remaining(0), remaining(1), remaining(2); ap != 9500 || eu != 10000 || us != 9500 {
		t.Fatalf("after 500 admitted in ap, ap to eu cut: remaining ap %d, eu %d, us %d; want 9500, 10000, 9500", ap, eu, us)
	}
	w.links[[2]int{0, 1}].setCut(false)
	admit(10)
	if ap, eu, us := remaining(0), remaining(1), remaining(2); ap != 9490 || eu != 9989 || us != 9490 {
		t.Errorf("healed, 10 more admitted: remaining ap %d, eu %d, us %d; want 9490, 9989 (10 and the one unit kept of what the cut link missed), 9490", ap, eu, us)
	}
}

// Charges owed to a region cut off are kept for at most as many keys as
// the limiter keeps pairs (MaxKeys): a long cut and a wide key space
// cannot grow them without bound.
func TestRegionsOwedBounded(t *testing.T) {
	w := newWorld(t, 50*time.Millisecond, 10*time.Second)
	l := bouncer.Limit{Name: "o", Algorithm: bouncer.TokenBucket, Rate: 1000, Period: time.Second, Burst: 1000, Mode: bouncer.Async}
	ms := memstore.New(memstore.Options{Now: w.clock.Now})
	t.Cleanup(func() { ms.Close() })
	peer := &link{Sharer: w.stores[1], clock: w.clock, delay: 50 * time.Millisecond}
	peer.setCut(true)
	h := hybrid.New(ms, nil, hybrid.Options{Now: w.clock.Now, Manual: true, Region: "ap", Peers: map[string]store.Sharer{"eu": peer}, MaxKeys: 64})
	t.Cleanup(func() { h.Close() })
	for k := range 500 {
		check(t, h, one(fmt.Sprintf("k%d", k), 1, l))
		if k%50 == 49 {
			w.clock.Advance(shareInterval)
			h.Tick(context.Background())
		}
	}
	if owed := h.Owed()["eu"]; owed == 0 || owed > 64 {
		t.Errorf("keys owed to eu, cut off, after 500 keys: %d, want 1 to 64 (MaxKeys)", owed)
	}
}

// A region cut off for several windows keeps its last share, and the
// others theirs: every window admits at most 1.2 times the limit, and,
// two exchange intervals after the link heals, 1.1 times again. Cut off
// longer than the TTL, a region is held to its static share (a third of
// the limit, though it has most of the demand), and holds itself to it.
func TestRegionsPartition(t *testing.T) {
	for _, mode := range []bouncer.Mode{bouncer.Async, bouncer.Strict, bouncer.Lease} {
		t.Run(mode.String(), func(t *testing.T) { testRegionsPartition(t, mode) })
	}
}

func testRegionsPartition(t *testing.T, mode bouncer.Mode) {
	l := globalWindow
	l.Mode = mode
	w, _, by := runPartition(t, l)
	// Window 2 is the last before the cut, where us, with most of the
	// demand, had about half the limit: cut off within the TTL it keeps
	// about that, well over its static share (a third).
	if us, before := by[4][2], by[2][2]; 10*us < 9*before || 10*us < 12*(l.Rate/3) {
		t.Errorf("window 4, us cut off within the TTL admitted %d, %d in the window before the cut: its last share was not kept", us, before)
	}
	for win := 7; win < 10; win++ {
		if us := by[win][2]; us > l.Rate/3+2 {
			t.Errorf("window %d, us cut off past the TTL admitted %d, over its static share %d", win, us, l.Rate/3)
		}
	}
	if us := by[12][2]; us < l.Rate/2 {
		t.Errorf("window 12, healed, us admitted %d: not its share again", us)
	}
	if rs := w.ins[2][0].Regions(); rs[0].Region != "us" || rs[1].Age < 0 || rs[1].Age > time.Second {
		t.Errorf("us's regions after the heal: %+v, want ap heard from within a second", rs)
	}
}

// With regions a strict fixed window is held to its share before it goes
// to the shared store, and each of its checks still counts as strict in
// the limiter's stats (bouncer_hybrid_decisions_total{mode="strict"}).
func TestRegionsStrictCounted(t *testing.T) {
	w := newWorld(t, 50*time.Millisecond, 10*time.Second)
	l := globalWindow
	l.Mode = bouncer.Strict
	h := w.ins[0][0]
	for range 5 {
		check(t, h, one("k", 1, l))
	}
	rs := make([]bouncer.Request, 3)
	for i := range rs {
		rs[i] = one("k", 1, l)
	}
	h.CheckEach(context.Background(), rs, make([]bouncer.Decision, 3), make([]error, 3))
	if st := h.Stats(); st.Strict != 8 {
		t.Errorf("Stats().Strict = %d after 8 strict checks, want 8 (%+v)", st.Strict, st)
	}
}
