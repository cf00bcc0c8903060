//go:build unix

package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/redisstore"
)

// failoverInstance is one service's limiter as cmd/bouncer's openStore
// builds it (a hybrid limiter over a Redis store, every option at its
// default), checking one mode's limits while callers run.
type failoverInstance struct {
	mode   bouncer.Mode
	rs     *redisstore.Store
	hy     *hybrid.Limiter
	always bouncer.Limit // never denies, in Redis or locally
	keys   []string
	acked  *ackCounter // what Redis acknowledged of keys, under the hybrid limiter

	checks, errs, degraded, wrong atomic.Int64
	slowest                       atomic.Int64 // ns
	firstDeg, lastDeg             atomic.Int64 // unix ns of the first and last Degraded decision

	mu    sync.Mutex
	fails []string
}

// failoverAlways is a limit that never denies in a test's time, and
// whose state in Redis counts what it admitted: a bucket of 10^8 that
// refills 14 286 a day (one in 6 s), so that the units a run admits are
// the bucket's burst less its remaining, to within a unit per 6 s. (A
// fixed window would not do: async mode holds back the pushes of a key
// far below its rate, and lease mode leaves a window's leases parked.)
func failoverAlways(mode bouncer.Mode) bouncer.Limit {
	return bouncer.Limit{Name: "always", Algorithm: bouncer.TokenBucket, Rate: 14286, Burst: 100_000_000, Period: 24 * time.Hour, Mode: mode}
}

// newFailoverInstance makes an instance on co deciding limits of mode,
// and waits until it has connected.
func newFailoverInstance(t *testing.T, co rueidis.ClientOption, mode bouncer.Mode, log *slog.Logger) *failoverInstance {
	t.Helper()
	rs, err := redisstore.New(redisstore.Options{Client: co, Prefix: freshPrefix(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), recoverBound)
	defer cancel()
	if err := rs.WaitConnected(ctx); err != nil {
		t.Fatalf("%v: not connected through Sentinel within %v: %+v", mode, recoverBound, rs.Health())
	}
	fi := &failoverInstance{mode: mode, rs: rs, always: failoverAlways(mode), keys: failureKeyNames("user:", 16)}
	fi.acked = &ackCounter{rs: rs, name: fi.always.Name, units: map[string]*atomic.Int64{}}
	for _, k := range fi.keys {
		fi.acked.units[k] = new(atomic.Int64)
	}
	fi.hy = hybrid.New(fi.acked, nil, hybrid.Options{})
	t.Cleanup(func() { fi.hy.Close() })
	return fi
}

func (fi *failoverInstance) fail(format string, args ...any) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if len(fi.fails) < 10 {
		fi.fails = append(fi.fails, fmt.Sprintf(format, args...))
	}
}

// record checks one decision of key k: no error, within returnBound,
// allowed (the limit never denies, and its policy is local).
func (fi *failoverInstance) record(k int, d bouncer.Decision, err error, took time.Duration) {
	fi.checks.Add(1)
	for m := fi.slowest.Load(); int64(took) > m && !fi.slowest.CompareAndSwap(m, int64(took)); m = fi.slowest.Load() {
	}
	if took > returnBound {
		fi.fail("check of %q took %v (deadline %v)", fi.keys[k], took, redisstore.DefaultTimeout)
	}
	switch {
	case err != nil:
		fi.errs.Add(1)
		fi.fail("check of %q: %v", fi.keys[k], err)
	case !d.Allowed:
		fi.wrong.Add(1)
		fi.fail("check of %q denied (Degraded %v), want allowed: %+v", fi.keys[k], d.Degraded, d)
	case d.Degraded:
		now := time.Now().UnixNano()
		fi.degraded.Add(1)
		fi.firstDeg.CompareAndSwap(0, now)
		fi.lastDeg.Store(now)
	}
}

// run checks the instance's keys in turn from callers goroutines until
// stop is closed, pausing pause between checks.
func (fi *failoverInstance) run(wg *sync.WaitGroup, stop <-chan struct{}, callers int, pause time.Duration) {
	for g := range callers {
		wg.Go(func() {
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := i % len(fi.keys)
				r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: fi.keys[k], Limits: []bouncer.Limit{fi.always}}}, Cost: 1}
				start := time.Now()
				d, err := fi.hy.Check(context.Background(), r)
				fi.record(k, d, err, time.Since(start))
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		})
	}
}

// exactKeys is how many fresh keys a round of exactRound checks: on a
// Cluster, enough that one at least falls on a killed master's groups
// (a third of the 8) but for a chance of (5/8)^16, under 0.1 %.
const exactKeys = 16

// exactRound checks exactKeys fresh keys under a limit of 3 of the
// instance's mode four times each, and reports whether the decisions
// were exact: three allowed, then denied, none Degraded.
func (fi *failoverInstance) exactRound(round int) bool {
	l := bouncer.Limit{Name: "three", Algorithm: bouncer.FixedWindow, Rate: 3, Period: 24 * time.Hour, Mode: fi.mode}
	for k := range exactKeys {
		key := fmt.Sprintf("exact-%d-%d", round, k)
		r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: 1}
		for i := range 4 {
			d, err := fi.hy.Check(context.Background(), r)
			if err != nil || d.Degraded || d.Allowed != (i < 3) {
				return false
			}
		}
	}
	return true
}

// waitExact makes exact rounds, one every 10ms, until one is exact, and
// returns when it started; after recoverBound it marks t failed (it may
// run in a goroutine of its own) and returns false.
func (fi *failoverInstance) waitExact(t *testing.T, round *atomic.Int64) (time.Time, bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for start := time.Now(); ; <-tick.C {
		at := time.Now()
		if fi.exactRound(int(round.Add(1))) {
			return at, true
		}
		if time.Since(start) > recoverBound {
			t.Errorf("%v: decisions not exact again within %v: %+v", fi.mode, recoverBound, fi.rs.Health())
			return time.Time{}, false
		}
	}
}

// ackCounter is the shared store under an instance's hybrid limiter: it
// counts, per key of the limit named name, the units Redis acknowledged:
// charged by a check it decided, less those refunded.
type ackCounter struct {
	rs    *redisstore.Store
	name  string
	units map[string]*atomic.Int64 // read-only after it is made
}

func (a *ackCounter) count(r bouncer.Request, sign int64) {
	for _, k := range r.Keys {
		if n := a.units[k.Key]; n != nil && len(k.Limits) > 0 && k.Limits[0].Name == a.name {
			n.Add(sign * r.Cost)
		}
	}
}

func (a *ackCounter) Check(ctx context.Context, r bouncer.Request) (bouncer.Decision, error) {
	d, err := a.rs.Check(ctx, r)
	if err == nil && d.Allowed && !d.Degraded && !r.Peek {
		a.count(r, 1)
	}
	return d, err
}

func (a *ackCounter) CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error) {
	a.rs.CheckEach(ctx, rs, ds, errs)
	for i, r := range rs {
		if errs[i] == nil && ds[i].Allowed && !ds[i].Degraded && !r.Peek {
			a.count(r, 1)
		}
	}
}

func (a *ackCounter) Refund(ctx context.Context, r bouncer.Request) error {
	err := a.rs.Refund(ctx, r)
	if err == nil {
		a.count(r, -1)
	}
	return err
}

// lost closes the hybrid limiter (its leases given back, its async usage
// pushed) and returns what Redis counts of the instance's keys against
// what it acknowledged: the difference is what the failover forgot (less
// what late replies charged after their checks had decided by policy).
func (fi *failoverInstance) lost(t *testing.T) (admitted, counted int64) {
	t.Helper()
	fi.hy.Close()
	strict := fi.always
	strict.Mode = bouncer.Strict
	for _, key := range fi.keys {
		admitted += fi.acked.units[key].Load()
		peek := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{strict}}}, Peek: true}
		d, err := fi.rs.Check(context.Background(), peek)
		for start := time.Now(); err == nil && d.Degraded && time.Since(start) < recoverBound; { // a late reply, a breaker yet to close
			d, err = fi.rs.Check(context.Background(), peek)
		}
		if err != nil || d.Degraded {
			t.Fatalf("%v: reading the count of %q: %+v, %v", fi.mode, key, d, err)
		}
		counted += strict.Burst - d.Remaining
	}
	return admitted, counted
}

// failoverReport is what one instance saw of one failover.
type failoverReport struct {
	mode                      bouncer.Mode
	checks, errs, wrong, deg  int64
	slowest                   time.Duration
	degFrom, degTo            time.Duration // first and last Degraded decision, since the failure
	promoted                  time.Duration // Sentinel's +switch-master (or the Cluster's new master), since the failure
	exact                     time.Duration // decisions exact again, since the promotion
	admitted, counted, lostBy int64
	lostSpan                  time.Duration // lostBy at the run's rate of admissions
}

func (r failoverReport) String() string {
	deg := "none"
	if r.deg > 0 {
		deg = fmt.Sprintf("%d (%v to %v after the failure)", r.deg, r.degFrom.Round(time.Millisecond), r.degTo.Round(time.Millisecond))
	}
	return fmt.Sprintf("%-6v checks %d, errors %d, against policy %d, slowest %v; degraded %s; promoted %v after the failure, exact again %v after the promotion; acknowledged %d, Redis counts %d: lost %d (%v of admissions)",
		r.mode, r.checks, r.errs, r.wrong, r.slowest.Round(time.Millisecond), deg, r.promoted.Round(time.Millisecond),
		r.exact.Round(time.Millisecond), r.admitted, r.counted, r.lostBy, r.lostSpan.Round(time.Millisecond))
}

func (fi *failoverInstance) report(ran time.Duration, failed, promoted, exact time.Time, admitted, counted int64) failoverReport {
	r := failoverReport{
		mode: fi.mode, checks: fi.checks.Load(), errs: fi.errs.Load(), wrong: fi.wrong.Load(), deg: fi.degraded.Load(),
		slowest: time.Duration(fi.slowest.Load()), promoted: promoted.Sub(failed), exact: exact.Sub(promoted),
		admitted: admitted, counted: counted, lostBy: admitted - counted,
	}
	if admitted > 0 {
		r.lostSpan = time.Duration(float64(r.lostBy) / float64(admitted) * float64(ran))
	}
	if r.deg > 0 {
		r.degFrom = time.Unix(0, fi.firstDeg.Load()).Sub(failed)
		r.degTo = time.Unix(0, fi.lastDeg.Load()).Sub(failed)
	}
	return r
}

// failoverLoad is the load of one failover run.
type failoverLoad struct {
	modes   []bouncer.Mode
	callers int           // per instance
	pause   time.Duration // between a caller's checks
	log     *slog.Logger  // the stores'
}

// failoverHooks make a failover happen and say when the new master
// took over: fail fails the master and returns a channel that receives
// the instant of the promotion; restore makes the set whole again.
type failoverHooks struct {
	fail    func(t *testing.T) <-chan time.Time
	restore func(t *testing.T)
}

// runFailover runs one instance per mode on co under load, fails the
// master with h while they check, waits until each decides exactly
// again, and returns what each saw. Every check must return without an
// error within returnBound and follow its policy.
func runFailover(t *testing.T, co rueidis.ClientOption, load failoverLoad, h failoverHooks) []failoverReport {
	t.Helper()
	var fis []*failoverInstance
	var round atomic.Int64
	for _, m := range load.modes {
		fi := newFailoverInstance(t, co, m, load.log)
		if _, ok := fi.waitExact(t, &round); !ok {
			t.FailNow()
		}
		fis = append(fis, fi)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopped := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopped)
	began := time.Now()
	for _, fi := range fis {
		fi.run(&wg, stop, load.callers, load.pause)
	}
	waitChecks(t, fis, 200)
	failed := time.Now()
	promotedCh := h.fail(t)
	var promoted time.Time
	select {
	case promoted = <-promotedCh:
	case <-time.After(recoverBound):
		t.Fatalf("no new master within %v of the failure", recoverBound)
	}
	exact := make([]time.Time, len(fis))
	var ewg sync.WaitGroup
	for i, fi := range fis {
		ewg.Go(func() { exact[i], _ = fi.waitExact(t, &round) })
	}
	ewg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitChecks(t, fis, 200) // the load goes on after it
	stopped()
	ran := time.Since(began)
	var reports []failoverReport
	for i, fi := range fis {
		admitted, counted := fi.lost(t)
		reports = append(reports, fi.report(ran, failed, promoted, exact[i], admitted, counted))
		fi.mu.Lock()
		for _, f := range fi.fails {
			t.Errorf("%v: %s", fi.mode, f)
		}
		fi.mu.Unlock()
	}
	h.restore(t)
	return reports
}

// waitChecks waits until each instance has made n more checks.
func waitChecks(t *testing.T, fis []*failoverInstance, n int64) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for _, fi := range fis {
		want := fi.checks.Load() + n
		for start := time.Now(); fi.checks.Load() < want; <-tick.C {
			if time.Since(start) > recoverBound {
				t.Fatalf("%v: %d checks in %v, want %d more", fi.mode, fi.checks.Load(), recoverBound, n)
			}
		}
	}
}

// sentinelKill kills the set's master (SIGKILL); restore starts it again,
// to rejoin as the new master's replica, and waits until the set is
// whole.
func sentinelKill(ps *privateSentinel) failoverHooks {
	var old int
	return failoverHooks{
		fail: func(t *testing.T) <-chan time.Time {
			ch := ps.switches(t)
			old = ps.master(t)
			ps.must(t, "kill", strconv.Itoa(old))
			return ch
		},
		restore: func(t *testing.T) {
			ps.must(t, "start", strconv.Itoa(old))
			ps.must(t, "wait")
		},
	}
}

// sentinelSwitch asks the sentinels for a failover (SENTINEL FAILOVER):
// the replica takes over with both nodes up.
func sentinelSwitch(ps *privateSentinel) failoverHooks {
	return failoverHooks{
		fail: func(t *testing.T) <-chan time.Time {
			ch := ps.switches(t)
			ps.must(t, "failover")
			return ch
		},
		restore: func(t *testing.T) { ps.must(t, "wait") },
	}
}

// sentinelSwitchGuarded is sentinelSwitch with min-replicas-to-write 1
// on both data nodes (docs/redis.md): the old master refuses writes
// once its replica has left it to take over, instead of accepting
// writes that the switch then discards.
func sentinelSwitchGuarded(ps *privateSentinel) failoverHooks {
	h := sentinelSwitch(ps)
	return failoverHooks{
		fail: func(t *testing.T) <-chan time.Time {
			ps.setBoth(t, "min-replicas-to-write", "1")
			return h.fail(t)
		},
		restore: func(t *testing.T) {
			h.restore(t)
			ps.setBoth(t, "min-replicas-to-write", "0")
		},
	}
}

var failoverModes = []bouncer.Mode{bouncer.Strict, bouncer.Lease, bouncer.Async}

// TestSentinelFailover fails the master of a private Sentinel set while
// an instance per mode (strict, lease, async, each as bouncer serve
// builds it, at default options) checks under load: killed (SIGKILL),
// then switched by SENTINEL FAILOVER. Every check must return without an
// error and within returnBound, follow its limit's policy (local: the
// limit never denies), and decisions must be exact again once the
// replica took over. The figures are TestSentinelFailoverFigures'.
func TestSentinelFailover(t *testing.T) {
	ps := startPrivateSentinel(t)
	load := failoverLoad{modes: failoverModes, callers: 16, pause: time.Millisecond,
		log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	for _, tc := range []struct {
		name  string
		hooks failoverHooks
	}{{"MasterKilled", sentinelKill(ps)}, {"SentinelFailover", sentinelSwitch(ps)}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range runFailover(t, sentinelOption(ps.set), load, tc.hooks) {
				t.Log(r)
			}
		})
	}
}

// TestSentinelFailoverFigures measures failovers for docs/redis.md: with
// BOUNCER_FAILOVER_FIGURES=N, N runs of each failover and each mode
// alone, at default options, from 64 callers that each pause 1 ms
// between checks (without a pause, callers whose checks an open breaker
// decides in a microsecond spin, and take the CPU from everything else).
func TestSentinelFailoverFigures(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("BOUNCER_FAILOVER_FIGURES"))
	if runs <= 0 {
		t.Skip("set BOUNCER_FAILOVER_FIGURES=N to measure N failovers of each kind")
	}
	ps := startPrivateSentinel(t)
	for _, how := range []struct {
		name  string
		hooks failoverHooks
	}{
		{"MasterKilled", sentinelKill(ps)},
		{"SentinelFailover", sentinelSwitch(ps)},
		{"SentinelFailoverMinReplicas", sentinelSwitchGuarded(ps)},
	} {
		t.Run(how.name, func(t *testing.T) {
			for _, m := range failoverModes {
				for i := range runs {
					load := failoverLoad{modes: []bouncer.Mode{m}, callers: 64, pause: time.Millisecond, log: slog.New(slog.DiscardHandler)}
					for _, r := range runFailover(t, sentinelOption(ps.set), load, how.hooks) {
						t.Logf("%s run %d: %v", how.name, i+1, r)
					}
				}
			}
		})
	}
}

// clusterKill kills (SIGKILL) the master of pr's Cluster that serves the
// first of its masters' slots: its keys' checks (about a third) fail
// until its replica takes over, which the channel reports as soon as
// the replica's ROLE says master. restore starts the killed node again,
// to rejoin as a replica, and waits until the Cluster is whole.
func clusterKill(pr *privateRedis) failoverHooks {
	var victim int
	return failoverHooks{
		fail: func(t *testing.T) <-chan time.Time {
			pr.node(t, "wait")
			victim = pr.owner(t, pr.liveClusterPort(t), 0).port
			// INFO replication's "slave0:ip=127.0.0.1,port=P,state=online,...".
			info := pr.mustCLI(t, victim, "INFO", "replication")
			_, rest, ok := strings.Cut(info, "slave0:")
			_, rest, _ = strings.Cut(rest, "port=")
			portText, _, _ := strings.Cut(rest, ",")
			replica, err := strconv.Atoi(portText)
			if !ok || err != nil {
				t.Fatalf("master %d has no replica:\n%s", victim, info)
			}
			pr.node(t, "kill", victim)
			ch := make(chan time.Time, 1)
			go func() {
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for start := time.Now(); time.Since(start) < recoverBound; <-tick.C {
					if role, err := pr.cli(replica, "ROLE"); err == nil && strings.HasPrefix(role, "master") {
						ch <- time.Now()
						return
					}
				}
			}()
			return ch
		},
		restore: func(t *testing.T) {
			pr.node(t, "start", victim)
			pr.node(t, "wait")
		},
	}
}

// TestClusterFailover kills a master of a private Cluster while an
// instance per mode checks under load, as TestSentinelFailover does:
// every check returns without an error within returnBound and by its
// policy, and decisions are exact again once the replica took over.
// (TestFailure/ClusterMasterKilled checks that only the dead master's
// keys degrade.)
func TestClusterFailover(t *testing.T) {
	pr := startPrivateRedis(t)
	load := failoverLoad{modes: failoverModes, callers: 16, pause: time.Millisecond,
		log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	for _, r := range runFailover(t, redisstore.ClientOption(pr.clusterAddrs), load, clusterKill(pr)) {
		t.Log(r)
	}
}

// TestClusterFailoverFigures is TestSentinelFailoverFigures on a
// Cluster whose master is killed.
func TestClusterFailoverFigures(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("BOUNCER_FAILOVER_FIGURES"))
	if runs <= 0 {
		t.Skip("set BOUNCER_FAILOVER_FIGURES=N to measure N failovers of each kind")
	}
	pr := startPrivateRedis(t)
	for _, m := range failoverModes {
		for i := range runs {
			load := failoverLoad{modes: []bouncer.Mode{m}, callers: 64, pause: time.Millisecond, log: slog.New(slog.DiscardHandler)}
			for _, r := range runFailover(t, redisstore.ClientOption(pr.clusterAddrs), load, clusterKill(pr)) {
				t.Logf("ClusterMasterKilled run %d: %v", i+1, r)
			}
		}
	}
}

// standaloneRestart restarts pr's standalone server on its port, as a
// maintenance restart does: stopped (SHUTDOWN), then started again,
// empty; the channel reports when it answers again.
func standaloneRestart(pr *privateRedis) failoverHooks {
	return failoverHooks{
		fail: func(t *testing.T) <-chan time.Time {
			t.Cleanup(func() { pr.script(60*time.Second, "redis-node.sh", "start", strconv.Itoa(pr.port)) })
			pr.node(t, "stop", pr.port)
			pr.node(t, "start", pr.port)
			ch := make(chan time.Time, 1)
			ch <- time.Now()
			return ch
		},
		restore: func(*testing.T) {},
	}
}

// testFailureRestartUnderLoad restarts the standalone server while an
// instance per mode, at default options, checks under load: every check
// returns without an error within returnBound and by its policy while
// the server is down, and decisions are exact again once it is back
// (its state is gone: it was not persisted).
func testFailureRestartUnderLoad(t *testing.T, pr *privateRedis) {
	load := failoverLoad{modes: failoverModes, callers: 16, pause: time.Millisecond,
		log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	co := redisstore.ClientOption([]string{fmt.Sprintf("127.0.0.1:%d", pr.port)})
	for _, r := range runFailover(t, co, load, standaloneRestart(pr)) {
		t.Log(r)
	}
}
