package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// roundPause is the least time between two rounds of
// BenchmarkCheckRandom: twice refillSpec's period, the time a sliding
// window counter takes to forget a check (the window it counted in, and
// the one after, must have passed).
const roundPause = 2 * time.Millisecond

// probeKey is the key of the probe checks that end each pause under
// refillSpec; no other check uses it.
const probeKey = "probe"

// BenchmarkCheckRandom measures one check of a key checked at random
// among n, as a server sees its clients: in rounds that each check every
// key once, in an order shuffled afresh, with a pause between two rounds.
// ns/op is the time spent in rounds over the checks; the pauses are not
// counted.
//
// With state=refilled the limit is refillSpec, one unit per millisecond
// up to one, so that every key's state has refilled by its next check (a
// client below its limit, as most clients are most of the time). Every
// key is checked once before the clock starts. A pause lasts roundPause,
// and until a probe key, checked once the round has ended, is allowed
// again: the implementation's own clock has then moved on enough for every
// state to have refilled, even if it lags (memstore's default clock ticks
// late when its goroutine waits for a vCPU). With a burst of one unit, a
// check is allowed only if its key's state has refilled, so the benchmark,
// which fails if any check is denied, proves that every check found its
// state refilled. Afterwards, a key checked twice at once must be refused
// the second time (state held), for at least 15 of 16 keys: a tick of a
// store's clock between the two checks may refill one.
//
// With state=live the limit is checkSpec and every key is warmed as for
// BenchmarkCheck, so that every check finds live state: the same rounds,
// order and pauses (of roundPause) on the state BenchmarkCheck measures.
// It fails as BenchmarkCheck does.
//
// In parallel, each round's order is split between the goroutines, which
// wait for each other at the end of the round, so that a key is checked
// by either goroutine at random.
func BenchmarkCheckRandom(b *testing.B) {
	for _, im := range impls {
		for _, n := range []int{10_000, 100_000} {
			keys := benchKeys[:n]
			for _, state := range []string{"refilled", "live"} {
				name := fmt.Sprintf("impl=%s/keys=%d/state=%s", im.name, n, state)
				b.Run(name+"/serial", func(b *testing.B) {
					l, rs := startRounds(b, im, keys, state, 1)
					defer l.close()
					b.ReportAllocs()
					checks, denied, failed := rs.serial(b, l)
					rs.report(b, checks)
					rs.verify(b, l, state, denied, failed)
				})
				b.Run(name+"/parallel", func(b *testing.B) {
					l, rs := startRounds(b, im, keys, state, runtime.GOMAXPROCS(0))
					defer l.close()
					var denied, failed atomic.Int64
					b.ReportAllocs()
					b.ResetTimer()
					rs.begin()
					b.RunParallel(func(pb *testing.PB) {
						d, f := rs.run(pb, l)
						denied.Add(d)
						failed.Add(f)
					})
					b.StopTimer()
					rs.report(b, b.N)
					rs.verify(b, l, state, int(denied.Load()), int(failed.Load()))
				})
			}
		}
	}
}

// startRounds returns a new im holding state for every key — refilled
// (one check each, then the first pause) or live (warmed as for
// BenchmarkCheck) — and the rounds that will check them.
func startRounds(b *testing.B, im impl, keys []string, state string, workers int) (limiter, *rounds) {
	b.Helper()
	rs := newRounds(keys, workers)
	var l limiter
	switch state {
	case "refilled":
		l = im.new(refillSpec)
		for _, i := range rs.order {
			if ok, err := l.allow(keys[i]); err != nil || !ok {
				b.Fatalf("first check of %q: %v, %v, want allowed", keys[i], ok, err)
			}
		}
		rs.probe = func() bool {
			ok, err := l.allow(probeKey)
			return ok && err == nil
		}
	case "live":
		l = warmed(b, im, keys)
	}
	rs.shuffle()
	runtime.GC()
	return l, rs
}

// rounds paces BenchmarkCheckRandom's checks. Goroutines join, take their
// share of the round's order, check it, and call done, which returns when
// the next round starts: the last goroutine to finish a round shuffles the
// order for the next one and waits out the pause (settle), while the
// others wait for it. A goroutine that stops (pb.Next returned false)
// leaves, and the rounds go on without it.
type rounds struct {
	keys    []string
	workers int         // how many parts a round's order is split into
	probe   func() bool // checks probeKey; nil: no probe
	order   []int32
	rng     *rand.Rand
	joined  atomic.Int32
	round   atomic.Int64 // rounds started

	mu      sync.Mutex
	active  int       // goroutines that joined and have not left
	arrived int       // of them, those done with this round
	start   time.Time // this round's start
	busy    time.Duration
	stuck   bool // a probe was refused for a second
}

func newRounds(keys []string, workers int) *rounds {
	rs := &rounds{keys: keys, workers: workers, order: make([]int32, len(keys)), rng: rand.New(rand.NewPCG(1, 2))}
	for i := range rs.order {
		rs.order[i] = int32(i)
	}
	rs.shuffle()
	return rs
}

func (rs *rounds) shuffle() {
	rs.rng.Shuffle(len(rs.order), func(i, j int) { rs.order[i], rs.order[j] = rs.order[j], rs.order[i] })
}

// begin waits out the pause after the state was made, then starts the
// first round.
func (rs *rounds) begin() {
	rs.settle()
	rs.start = time.Now()
}

// settle waits out a pause: until the probe is allowed, which charges it
// after every check so far, then roundPause, then until the probe is
// allowed again, which it is once its state, and every other, has
// refilled on the implementation's clock. It spins, yielding so that the
// stores' clock goroutines run meanwhile.
func (rs *rounds) settle() {
	rs.await()
	for t := time.Now(); time.Since(t) < roundPause; {
		runtime.Gosched()
	}
	rs.await()
}

// await spins until the probe is allowed, for at most a second.
func (rs *rounds) await() {
	if rs.probe == nil {
		return
	}
	for t := time.Now(); !rs.probe(); {
		if time.Since(t) > time.Second {
			rs.stuck = true
			return
		}
		runtime.Gosched()
	}
}

// join returns the calling goroutine's part of every round: one of
// workers, each goroutine its own.
func (rs *rounds) join() int {
	rs.mu.Lock()
	rs.active++
	rs.mu.Unlock()
	return int(rs.joined.Add(1)-1) % rs.workers
}

// share returns part g of the current round's order and the round.
func (rs *rounds) share(g int) ([]int32, int64) {
	n := len(rs.order)
	return rs.order[g*n/rs.workers : (g+1)*n/rs.workers], rs.round.Load()
}

// done reports the calling goroutine's part of round r checked, and
// returns when the next round starts.
func (rs *rounds) done(r int64) {
	rs.mu.Lock()
	rs.arrived++
	if rs.arrived == rs.active {
		rs.next()
	}
	rs.mu.Unlock()
	for rs.round.Load() == r {
		runtime.Gosched()
	}
}

// leave takes the calling goroutine out of the rounds.
func (rs *rounds) leave() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.active--
	switch {
	case rs.active == 0:
		rs.busy += time.Since(rs.start)
	case rs.arrived == rs.active:
		rs.next()
	}
}

// next ends this round and starts the next one. It holds the lock.
func (rs *rounds) next() {
	rs.busy += time.Since(rs.start)
	rs.shuffle()
	rs.settle()
	rs.arrived = 0
	rs.start = time.Now()
	rs.round.Add(1)
}

// checker is what rounds drive: a limiter, or BenchmarkCheckRandomFloor's
// table.
type checker interface {
	allow(key string) (bool, error)
}

// serial checks every round with c, alone, for b.Loop, and returns how
// many checks it made, how many were denied and how many failed.
func (rs *rounds) serial(b *testing.B, c checker) (checks, denied, failed int) {
	rs.begin()
	g := rs.join()
	part, r := rs.share(g)
	j := 0
	for b.Loop() {
		ok, err := c.allow(rs.keys[part[j]])
		if err != nil {
			failed++
		} else if !ok {
			denied++
		}
		checks++
		if j++; j == len(part) {
			rs.done(r)
			part, r = rs.share(g)
			j = 0
		}
	}
	rs.leave()
	return checks, denied, failed
}

// run checks the calling goroutine's part of every round with c until pb
// stops it, and returns how many checks were denied and how many failed.
func (rs *rounds) run(pb *testing.PB, c checker) (denied, failed int64) {
	g := rs.join()
	defer rs.leave()
	for {
		part, r := rs.share(g)
		for _, i := range part {
			if !pb.Next() {
				return denied, failed
			}
			ok, err := c.allow(rs.keys[i])
			if err != nil {
				failed++
			} else if !ok {
				denied++
			}
		}
		rs.done(r)
	}
}

// report sets ns/op to the time spent in rounds over the checks.
func (rs *rounds) report(b *testing.B, checks int) {
	if checks > 0 {
		b.ReportMetric(float64(rs.busy.Nanoseconds())/float64(checks), "ns/op")
	}
}

// verify fails b unless every check was allowed and l holds state as the
// workload says.
func (rs *rounds) verify(b *testing.B, l limiter, state string, denied, failed int) {
	b.Helper()
	if state == "live" {
		verify(b, l, rs.keys, denied, failed)
		return
	}
	if rs.stuck {
		b.Fatalf("a probe check was refused for a second: the limit does not refill")
	}
	if denied > 0 || failed > 0 {
		b.Fatalf("%d checks denied and %d failed, want all allowed (state refilled)", denied, failed)
	}
	if got := l.count(); got > len(rs.keys)+1 {
		b.Fatalf("holds %d keys, want at most %d (and the probe's)", got, len(rs.keys))
	}
	rs.settle()
	refused := 0
	for _, k := range rs.keys[:16] {
		if ok, err := l.allow(k); err != nil || !ok {
			b.Fatalf("check of %q after a pause: %v, %v, want allowed", k, ok, err)
		}
		if ok, err := l.allow(k); err != nil {
			b.Fatalf("second check of %q: %v", k, err)
		} else if !ok {
			refused++
		}
	}
	if refused < 15 {
		b.Fatalf("%d of 16 keys checked twice at once were refused the second time, want at least 15: state not held", refused)
	}
}

// BenchmarkCheckRandomFloor is BenchmarkCheckFloor on BenchmarkCheckRandom's
// workload: the same keys, rounds, order and pauses (of roundPause), each
// check adding 1 to its key's value in BenchmarkCheckFloor's table. It
// fails if a key is not found or if the values do not add up to the
// checks.
func BenchmarkCheckRandomFloor(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		keys := benchKeys[:n]
		b.Run(fmt.Sprintf("keys=%d/serial", n), func(b *testing.B) {
			t := newFloorTable(b, keys)
			rs := newRounds(keys, 1)
			runtime.GC()
			b.ReportAllocs()
			checks, missed, _ := rs.serial(b, floorChecker{t})
			rs.report(b, checks)
			t.verify(b, missed, checks)
		})
		b.Run(fmt.Sprintf("keys=%d/parallel", n), func(b *testing.B) {
			t := newFloorTable(b, keys)
			rs := newRounds(keys, runtime.GOMAXPROCS(0))
			runtime.GC()
			var missed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			rs.begin()
			b.RunParallel(func(pb *testing.PB) {
				m, _ := rs.run(pb, floorChecker{t})
				missed.Add(m)
			})
			b.StopTimer()
			rs.report(b, b.N)
			t.verify(b, int(missed.Load()), b.N)
		})
	}
}

// floorChecker is a floor table as a checker: allowed means found.
type floorChecker struct{ *floorTable }

func (f floorChecker) allow(key string) (bool, error) { return f.check(key), nil }
