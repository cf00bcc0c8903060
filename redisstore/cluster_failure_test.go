//go:build unix

package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// failureKeyNames are n keys, spread over the Cluster's slots by their
// buckets.
func failureKeyNames(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	return keys
}

// failureAllByRedis checks every key once and reports whether Redis
// decided every check.
func failureAllByRedis(t *testing.T, s *redisstore.Store, keys []string, l bouncer.Limit) bool {
	t.Helper()
	ok := true
	for _, k := range keys {
		if d := failureCheck(t, s, failureRequest(k, l)); d.Degraded {
			ok = false
		}
	}
	return ok
}

// testFailureClusterMasterKilled kills (SIGKILL) the master of some of
// the checked keys while goroutines keep checking: its replica takes over
// after cluster-node-timeout (2s), the client finds it, and Redis decides
// again; meanwhile every decision follows its store's policy, and a live
// master's breaker never opens, and its keys never degrade, because
// another master died. The killed node then rejoins as a replica.
//
// On a loaded machine a call to a live master may miss its deadline, and
// its check then decides by policy: the test tells those apart by the
// node's own counts (Health), not by asking the machine to be fast.
func testFailureClusterMasterKilled(t *testing.T, pr *privateRedis) {
	pr.node(t, "wait")
	c := newClient(t, pr.clusterAddrs)
	const timeout = 100 * time.Millisecond
	// A live master's PING may come late on a loaded machine, and with
	// failureBreaker's 200ms that would open its breaker; a killed
	// master's probe fails at once (connection refused), so with a probe
	// timeout of returnBound its breaker opens as soon, and a live one's
	// only if it stops answering.
	breaker := redisstore.BreakerOptions{ProbeTimeout: returnBound, OpenFor: failureBreaker.OpenFor}
	always := failurePerHour("always", bouncer.MaxRate, bouncer.StoreErrorDefault)
	keys := failureKeyNames("user:", 12)

	type target struct {
		name   string
		s      *redisstore.Store
		prefix string
		bg     *failureBackground
	}
	var targets []*target
	for _, p := range []bouncer.StoreErrorPolicy{bouncer.StoreErrorAllow, bouncer.StoreErrorDeny, bouncer.StoreErrorLocal} {
		prefix := freshPrefix()
		s := newStore(t, c, redisstore.Options{Prefix: prefix, Timeout: timeout, OnStoreError: p, Breaker: breaker})
		bg := &failureBackground{name: p.String(), policy: p, degBy: map[string]*atomic.Int64{}}
		for _, k := range keys {
			bg.degBy[k] = new(atomic.Int64)
		}
		targets = append(targets, &target{name: p.String(), s: s, prefix: prefix, bg: bg})
	}
	for _, tg := range targets {
		for start := time.Now(); !failureAllByRedis(t, tg.s, keys, always); {
			if time.Since(start) > recoverBound {
				t.Fatalf("%s: checks degraded with the cluster healthy: %+v", tg.name, tg.s.Health())
			}
		}
	}

	// The victim: the master of the lowest slot the keys use.
	slots := pr.slotsOf(t, targets[0].prefix)
	slot := failureSortedSlots(slots)[0]
	victim := pr.owner(t, pr.liveClusterPort(t), slot)
	var onVictim int
	victimSlots := map[int]bool{}
	owners := map[int]int{} // slot → the port of its master before the kill
	for s := range slots {
		owners[s] = pr.owner(t, victim.port, s).port
		if owners[s] == victim.port {
			onVictim++
			victimSlots[s] = true
		}
	}
	t.Logf("keys use %d slots, %d of them on master %d, which is killed", len(slots), onVictim, victim.port)
	// Whatever happens, the node runs again for the tests after this one.
	t.Cleanup(func() { pr.script(60*time.Second, "redis-node.sh", "start", strconv.Itoa(victim.port)) })

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, tg := range targets {
		for g := range 2 {
			h := g * len(keys) / 2
			ks := append(slices.Clone(keys[h:]), keys[:h]...)
			wg.Go(func() { tg.bg.run(tg.s, ks, always, stop, time.Millisecond) })
		}
	}
	stopped := false
	stopBackground := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopBackground)
	time.Sleep(300 * time.Millisecond)
	for _, tg := range targets {
		if n := tg.bg.deg.Load(); n != 0 {
			t.Logf("%s: %d checks degraded before the kill (a slow machine?)", tg.name, n)
		}
	}

	type counts struct{ n, deg int64 }
	snapshot := func() []counts {
		var cs []counts
		for _, tg := range targets {
			cs = append(cs, counts{tg.bg.n.Load(), tg.bg.deg.Load()})
		}
		return cs
	}
	atKill := snapshot()
	pr.node(t, "kill", victim.port)
	killed := time.Now()
	other := pr.liveClusterPort(t)

	// The replica takes over.
	for {
		if o := pr.owner(t, other, slot); o.port != victim.port {
			t.Logf("replica %d took over slot %d %v after the kill", o.port, slot, time.Since(killed).Round(time.Millisecond))
			break
		}
		if time.Since(killed) > recoverBound {
			t.Fatalf("no failover of slot %d %v after the kill", slot, recoverBound)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Redis decides every key's checks again.
	for _, tg := range targets {
		for !failureAllByRedis(t, tg.s, keys, always) {
			if time.Since(killed) > recoverBound+5*time.Second {
				t.Fatalf("%s: checks still degraded %v after the kill: %+v", tg.name, time.Since(killed), tg.s.Health())
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s: Redis decides every key again %v after the kill", tg.name, time.Since(killed).Round(time.Millisecond))
		if tg.bg.deg.Load() == 0 {
			t.Errorf("%s: no check was degraded while a master was dead", tg.name)
		}
	}

	// Breakers are per node: while one master is dead, only the keys of
	// its slots degrade; the others' checks go on deciding in Redis, but
	// for those whose own call was late. Every degraded check of a live
	// master's key counted its late call on that master before it
	// returned, so the counts of degraded checks are read first.
	keySlot := func(tg *target, key string) int {
		hash, _ := redisstore.StateOf(tg.s, always, key)
		return int(redisstore.KeySlot(hash))
	}
	for _, tg := range targets {
		var onDead []string
		degOn := map[int]int64{} // a live master's port → degraded checks of its keys
		for _, k := range keys {
			n := tg.bg.degBy[k].Load()
			switch slot := keySlot(tg, k); {
			case !slots[slot]:
				t.Fatalf("test bug: key %q's slot %d is not among the keys' slots %v", k, slot, failureSortedSlots(slots))
			case victimSlots[slot]:
				if n > 0 {
					onDead = append(onDead, k)
				}
			default:
				degOn[owners[slot]] += n
			}
		}
		nodes := tg.s.Health().Nodes
		for port, deg := range degOn {
			i := slices.IndexFunc(nodes, func(n redisstore.NodeHealth) bool { return strings.HasSuffix(n.Addr, ":"+strconv.Itoa(port)) })
			if i < 0 {
				t.Errorf("%s: live master %d is not among the store's nodes %+v", tg.name, port, nodes)
				continue
			}
			switch n := nodes[i]; {
			case n.Opens != 0:
				t.Errorf("%s: the breaker of live master %d opened %d times while master %d was dead: %+v", tg.name, port, n.Opens, victim.port, n)
			case n.Failures != 0:
				t.Errorf("%s: %d calls to live master %d failed while master %d was dead: %+v", tg.name, n.Failures, port, victim.port, n)
			case uint64(deg) > n.SlowN:
				t.Errorf("%s: checks of keys on live master %d degraded %d times, but only %d of its calls missed their deadline: the others degraded because master %d died (%+v)",
					tg.name, port, deg, n.SlowN, victim.port, n)
			case deg > 0:
				t.Logf("%s: %d checks of keys on live master %d degraded, with %d of its calls past their deadline: a loaded machine, not the dead master", tg.name, deg, port, n.SlowN)
			}
		}
		if len(onDead) == 0 {
			t.Errorf("%s: no key of the dead master degraded", tg.name)
		}
	}
	for i, c := range snapshot() {
		n, deg := c.n-atKill[i].n, c.deg-atKill[i].deg
		t.Logf("%s: from the kill until Redis decided again, %d of %d background checks (%.0f%%) were degraded; %d of the keys' %d slots were on the dead master",
			targets[i].name, deg, n, 100*float64(deg)/float64(max(n, 1)), onVictim, len(slots))
	}

	// The killed node comes back as a replica.
	pr.node(t, "start", victim.port)
	pr.node(t, "wait")
	if role := strings.Fields(pr.mustCLI(t, victim.port, "ROLE")); len(role) == 0 || role[0] != "slave" {
		t.Errorf("restarted node %d: ROLE %v, want slave", victim.port, role)
	}
	time.Sleep(200 * time.Millisecond)
	stopBackground()
	for _, tg := range targets {
		tg.bg.report(t)
		t.Logf("%s: %+v", tg.name, tg.s.Health())
	}
}

func failureSortedSlots(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// testFailureClusterSlotMigration moves every slot the checked keys use to
// another master (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE ... KEYS,
// SETSLOT NODE) while goroutines keep checking them, so that checks meet
// ASK and MOVED redirections. An exact limit admits exactly its rate
// across the migration: nothing is lost or counted twice, and Redis
// decides every check.
func testFailureClusterSlotMigration(t *testing.T, pr *privateRedis) {
	pr.node(t, "wait")
	c := newClient(t, pr.clusterAddrs)
	// A generous deadline: no check may be degraded, or exactness fails.
	s, prefix := failureClusterStore(t, c, 2*time.Second, bouncer.StoreErrorDeny)
	const rate = 2000
	limits := []bouncer.Limit{
		failurePerHour("hour", rate, bouncer.StoreErrorDefault),
		// A second Redis key in the same slot (not binding): the script's
		// keys must move together.
		{Name: "hour-swc", Algorithm: bouncer.SlidingWindowCounter, Rate: 2 * rate, Period: time.Hour},
	}
	// Each key is also checked under a limit of its own alone, which goes
	// out in the store's batches by group (see batch.go): through the
	// migration, batches find keys moved, stop, and send them again.
	one := failurePerHour("one", rate, bouncer.StoreErrorDefault)
	keys := failureKeyNames("tenant:", 3)
	admitted := make([]atomic.Int64, len(keys))
	admittedOne := make([]atomic.Int64, len(keys))
	for i, k := range keys {
		d := failureCheck(t, s, failureRequest(k, limits...))
		if !d.Allowed || d.Degraded {
			t.Fatalf("first check of %q: %+v", k, d)
		}
		admitted[i].Add(1)
		if d := failureCheck(t, s, failureRequest(k, one)); !d.Allowed || d.Degraded {
			t.Fatalf("first check of %q alone: %+v", k, d)
		}
		admittedOne[i].Add(1)
	}

	// Plan: each slot the keys use moves to the next master.
	live := pr.liveClusterPort(t)
	var masters []failureClusterNode
	for _, n := range pr.clusterNodes(t, live) {
		if n.master && !n.failed && len(n.slots) > 0 {
			masters = append(masters, n)
		}
	}
	slices.SortFunc(masters, func(a, b failureClusterNode) int { return a.port - b.port })
	type move struct {
		slot     int
		src, dst failureClusterNode
	}
	var moves []move
	for _, slot := range failureSortedSlots(pr.slotsOf(t, prefix)) {
		src := pr.owner(t, live, slot)
		i := slices.IndexFunc(masters, func(n failureClusterNode) bool { return n.id == src.id })
		moves = append(moves, move{slot, src, masters[(i+1)%len(masters)]})
	}

	// Phases, for the log: 0 before, 1 slot migrating with its keys still
	// on the source, 2 keys moved (ASK), 3 slot reassigned (MOVED), 4 after.
	var phase atomic.Int32
	var perPhase [5]atomic.Int64
	var migrated atomic.Bool
	var errMu sync.Mutex
	var errs []string
	fail := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(errs) < 10 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			exhausted := make([]bool, 2*len(keys)) // under limits, then under one
			giveUp := time.Now().Add(60 * time.Second)
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if migrated.Load() && !slices.Contains(exhausted, false) {
					return
				}
				if time.Now().After(giveUp) {
					fail("checks still running after 60s")
					return
				}
				j := i % (2 * len(keys))
				k, ls, count := j%len(keys), limits, admitted
				if j >= len(keys) {
					ls, count = []bouncer.Limit{one}, admittedOne
				}
				ph := phase.Load()
				start := time.Now()
				d, err := s.Check(context.Background(), failureRequest(keys[k], ls...))
				took := time.Since(start)
				perPhase[ph].Add(1)
				switch {
				case err != nil:
					fail("phase %d: check of %q: %v", ph, keys[k], err)
				case d.Degraded:
					fail("phase %d: check of %q degraded (%v): %+v", ph, keys[k], s.Health().LastErr, d)
				case d.Allowed:
					count[k].Add(1)
				case migrated.Load():
					exhausted[j] = true
				}
				if took > returnBound {
					fail("phase %d: check of %q took %v", ph, keys[k], took)
				}
				if !migrated.Load() {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}
	stopped := false
	stopChecks := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopChecks)

	ok := func(port int, args ...string) {
		t.Helper()
		if out := pr.mustCLI(t, port, args...); out != "OK" {
			t.Fatalf("redis-cli -p %d %s: %s", port, strings.Join(args, " "), out)
		}
	}
	// probeNew checks every key, in another store (so that its failures
	// open no breaker of s), under limits that have no state yet: during
	// the migration of a key's slot, Redis runs a script for missing keys
	// only on the importing node, after ASK, and there only if it names
	// one key; for more it replies TRYAGAIN until the migration ends.
	probe, _ := failureClusterStore(t, c, 2*time.Second, bouncer.StoreErrorDeny)
	var probes, probeDegraded [2][3]int // [one limit, two limits][phase]
	var tryAgain string
	probeNew := func(ph int) {
		t.Helper()
		for _, k := range keys {
			n := strconv.Itoa(probes[0][ph] + probes[1][ph])
			for i, r := range []bouncer.Request{
				failureRequest(k, failurePerHour("new-"+n, rate, bouncer.StoreErrorDefault)),
				failureRequest(k, failurePerHour("new-a-"+n, rate, bouncer.StoreErrorDefault), failurePerHour("new-b-"+n, rate, bouncer.StoreErrorDefault)),
			} {
				probes[i][ph]++
				d := failureCheck(t, probe, r)
				if d.Degraded {
					probeDegraded[i][ph]++
					if e := probe.Health().LastErr; e != nil {
						tryAgain = e.Error()
					}
				}
				if d.Allowed == d.Degraded { // deny policy; Redis allows a fresh limit
					t.Errorf("phase %d: check of %q under %d fresh limits: %+v", ph, k, i+1, d)
				}
			}
		}
	}
	const pause = 150 * time.Millisecond
	time.Sleep(pause)
	began := time.Now()
	for _, m := range moves {
		sl := strconv.Itoa(m.slot)
		ok(m.dst.port, "CLUSTER", "SETSLOT", sl, "IMPORTING", m.src.id)
		ok(m.src.port, "CLUSTER", "SETSLOT", sl, "MIGRATING", m.dst.id)
		phase.Store(1)
		probeNew(1)
		time.Sleep(pause)
		moved := strings.Fields(pr.mustCLI(t, m.src.port, "CLUSTER", "GETKEYSINSLOT", sl, "1000"))
		if len(moved) == 0 {
			t.Fatalf("slot %d holds no keys on %d", m.slot, m.src.port)
		}
		ok(m.src.port, append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(m.dst.port), "", "0", "5000", "KEYS"}, moved...)...)
		phase.Store(2)
		probeNew(2)
		time.Sleep(pause)
		ok(m.dst.port, "CLUSTER", "SETSLOT", sl, "NODE", m.dst.id)
		ok(m.src.port, "CLUSTER", "SETSLOT", sl, "NODE", m.dst.id)
		for _, n := range masters {
			if n.id != m.src.id && n.id != m.dst.id {
				ok(n.port, "CLUSTER", "SETSLOT", sl, "NODE", m.dst.id)
			}
		}
		phase.Store(3)
		time.Sleep(pause)
		t.Logf("slot %d (%d keys) moved from %d to %d", m.slot, len(moved), m.src.port, m.dst.port)
	}
	phase.Store(4)
	took := time.Since(began)
	var atEnd []int64
	for i := range admitted {
		atEnd = append(atEnd, admitted[i].Load())
	}
	migrated.Store(true)
	wg.Wait()
	stopChecks()

	for _, e := range errs {
		t.Error(e)
	}
	var counts []int64
	for i := range perPhase {
		counts = append(counts, perPhase[i].Load())
	}
	t.Logf("migration of %d slots took %v; checks per phase (before, migrating, keys moved, reassigned, after): %v; admitted when it ended: %v of %d",
		len(moves), took.Round(time.Millisecond), counts, atEnd, rate)
	for i, k := range keys {
		if n := admitted[i].Load(); n != rate {
			t.Errorf("key %q: %d admitted across the migration, want exactly %d", k, n, rate)
		}
		if n := admittedOne[i].Load(); n != rate {
			t.Errorf("key %q alone: %d admitted across the migration, want exactly %d", k, n, rate)
		}
		if atEnd[i] >= rate {
			t.Errorf("key %q: its limit was exhausted before the migration ended, so checks did not overlap it; raise rate", k)
		}
	}
	if counts[1] == 0 || counts[2] == 0 || counts[3] == 0 {
		t.Errorf("no checks in some phase of the migration: %v", counts)
	}
	t.Logf("checks of keys under limits with no state yet (migrating, keys moved): one limit: %v of %v degraded; two limits: %v of %v degraded (last error: %s)",
		probeDegraded[0][1:], probes[0][1:], probeDegraded[1][1:], probes[1][1:], tryAgain)
	if n := probeDegraded[0][1] + probeDegraded[0][2]; n != 0 {
		t.Errorf("%d checks of one fresh limit degraded during the migration, want none (ASK serves them)", n)
	}
	if st := s.Health(); st.DegradedN != 0 || st.Failures != 0 {
		t.Errorf("health %+v: want no degraded checks and no failures", st)
	}
	for _, m := range moves {
		for _, port := range []int{m.src.port, m.dst.port} {
			if o := pr.owner(t, port, m.slot); o.id != m.dst.id {
				t.Errorf("node %d: slot %d owned by %d, want %d", port, m.slot, o.port, m.dst.port)
			}
		}
	}
}
