package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/bouncerhq/bouncer/redisstore"
)

var (
	builtOnce sync.Once
	builtPath string
	builtErr  error
)

// bouncerBinary builds the bouncer command as users get it (without the
// race detector this test binary may carry), once per test binary.
func bouncerBinary(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bouncer-bin-")
		if err != nil {
			builtErr = err
			return
		}
		builtPath = filepath.Join(dir, "bouncer")
		out, err := exec.Command("go", "build", "-o", builtPath, ".").CombinedOutput()
		if err != nil {
			builtErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtPath
}

// holdAlgorithms are the algorithms TestServeLimitsHold limits one key
// each with, at holdRate per second (buckets: bursts of holdRate too),
// besides two fixed windows whose rules fail open and closed.
var holdAlgorithms = []string{"token_bucket", "gcra", "leaky_bucket", "fixed_window", "sliding_window_log", "sliding_window_counter"}

const holdRate = 20

func holdConfig() string {
	var b strings.Builder
	b.WriteString("domain: hold\nrules:\n")
	for _, a := range holdAlgorithms {
		burst := ""
		if strings.Contains(a, "bucket") || a == "gcra" {
			burst = fmt.Sprintf(", burst: %d", holdRate)
		}
		fmt.Fprintf(&b, "  - name: %s\n    match: [{key: alg, value: %s}]\n    limits: [{rate: %d, period: 1s%s, algorithm: %s}]\n", a, a, holdRate, burst, a)
	}
	for _, p := range []string{"allow", "deny"} {
		fmt.Fprintf(&b, "  - name: fail_%s\n    match: [{key: alg, value: fail_%s}]\n    on_store_error: %s\n    limits: [{rate: %d, period: 1s, algorithm: fixed_window}]\n", p, p, p, holdRate)
	}
	return b.String()
}

// holdAnswer is one answer the load got.
type holdAnswer struct {
	key        int // index in holdKeys; -1: a control, which no rule limits
	proc       int
	send, recv time.Time     // wall clock, the clock Redis decides on
	sent, done time.Duration // monotonic, since the load began
	allowed    bool
	degraded   bool
	remaining  uint32
	err        error
}

func (a holdAnswer) took() time.Duration { return a.done - a.sent }

func holdKeys() []string { return append(slices.Clone(holdAlgorithms), "fail_allow", "fail_deny") }

// holdSpan is a stretch of the run with Redis healthy, and each process's
// metrics scraped just before it began and just after it ended: an answer
// sent after from and received before to was counted between the two.
type holdSpan struct {
	from, to   time.Duration
	begin, end []holdMetrics
}

// Three `bouncer serve` processes with default flags share one real
// Redis under a load that saturates the machine; Redis is frozen (DEBUG
// SLEEP) and later killed mid-run. The test asserts what DESIGN §4
// promises, in terms that a loaded machine does not change:
//
//   - with Redis healthy, Redis decides: fewer than half of the answers
//     are degraded, and each degraded one is a late reply — it waited out
//     the store's whole deadline, and its store counted a call that did
//     not succeed in time. A busy machine misses the deadline now and
//     then, and the policy answers those; only when most calls miss it
//     does the design treat Redis as too slow to use (the breaker's
//     lateTooLong): a breaker may open then, never without late or
//     failed calls, and the process's answers of that span (by policy at
//     once while it is open) are left out of the count;
//   - while Redis is frozen and dead, every key is answered by its rule's
//     policy (local by default: each instance limits on its own; allow;
//     deny), and so is every degraded answer of the run;
//   - the limits hold throughout: in Redis across the three (the bucket
//     bound for buckets, the window's rate per window), before the kill
//     and after it on Redis's empty state, and in each instance's local
//     store for the answers it gave by the default policy;
//   - no answer waits longer than the store's deadline and a margin
//     beyond what the machine held a control caller meanwhile (see
//     holdLatency).
func TestServeLimitsHold(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the three-process run takes about 15 s")
	}
	requireRedisServer(t)
	bin := bouncerBinary(t)
	redis := startRedisProc(t, freePort(t))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hold.yaml"), []byte(holdConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	const procs, callersEach, controlsEach = 3, 32, 4
	var clients []pb.RateLimitServiceClient
	var admins []string
	for range procs {
		g, a := freeAddr(t), freeAddr(t)
		startServeBinary(t, bin, "--config", dir, "--store", "redis://"+redis.addr(), "--grpc-addr", g, "--http-addr", "", "--admin-addr", a)
		clients, admins = append(clients, rlsClient(t, g)), append(admins, a)
	}
	keys := holdKeys()

	base := time.Now()
	since := func() time.Duration { return time.Since(base) }
	ask := func(p, k int) holdAnswer {
		pair := "control=1"
		if k >= 0 {
			pair = "alg=" + keys[k]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a := holdAnswer{key: k, proc: p, send: time.Now().Round(0), sent: since()}
		resp, degraded, err := decide(ctx, clients[p], "hold", pair)
		a.done, a.recv = since(), time.Now().Round(0)
		a.degraded, a.err = degraded, err
		if err == nil {
			a.allowed = resp.OverallCode == pb.RateLimitResponse_OK
			if len(resp.Statuses) > 0 {
				a.remaining = resp.Statuses[0].LimitRemaining
			}
		}
		return a
	}

	var healthy []holdSpan
	begin := scrapeAll(t, admins)
	from := since()
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	answers := make([][]holdAnswer, procs*callersEach)
	controls := make([][]holdAnswer, procs*controlsEach)
	for p := range procs {
		for g := range callersEach {
			slot := p*callersEach + g
			wg.Go(func() {
				for i := g; ctx.Err() == nil; i++ {
					answers[slot] = append(answers[slot], ask(p, i%len(keys)))
				}
			})
		}
		for g := range controlsEach {
			slot := p*controlsEach + g
			wg.Go(func() {
				for ctx.Err() == nil {
					controls[slot] = append(controls[slot], ask(p, -1))
				}
			})
		}
	}
	run := func(d time.Duration) { <-time.After(d) }
	endSpan := func() []holdMetrics {
		to := since()
		end := scrapeAll(t, admins)
		healthy = append(healthy, holdSpan{from: from, to: to, begin: begin, end: end})
		return end
	}

	run(3 * time.Second)
	first := endSpan()
	// How loaded the machine is: the store checks that took longer than
	// 5 ms, the deadline before it was chosen from measurements.
	var checks, within5ms float64
	for _, m := range first {
		checks += m.sum(`bouncer_store_check_seconds_count{outcome="ok"`)
		within5ms += m.sum(`bouncer_store_check_seconds_bucket{outcome="ok",le="0.005"`)
	}
	t.Logf("store checks with Redis healthy: %.0f, of which %.0f (%.2f%%) took over 5 ms", checks, checks-within5ms, 100*(checks-within5ms)/max(checks, 1))
	frozeAt := since()
	<-redis.freeze(t, 1500*time.Millisecond)
	thawedAt := since()
	begin, from = holdBreakersClosed(t, admins, since)
	run(time.Second)
	endSpan()
	killedAt := since()
	redis.kill(t)
	run(1500 * time.Millisecond)
	redis.start(t)
	backAt := since()
	begin, from = holdBreakersClosed(t, admins, since)
	run(1500 * time.Millisecond)
	last := endSpan()
	stop()
	wg.Wait()
	end := since()

	var all []holdAnswer
	for _, as := range answers {
		all = append(all, as...)
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("started at %s", base.Format("15:04:05.000"))
	t.Logf("%d answers and %d controls in %v: healthy %v–%v, frozen %v–%v, healthy %v–%v, killed at %v, back at %v, healthy %v–%v",
		len(all), len(slices.Concat(controls...)), ms(end), ms(healthy[0].from), ms(healthy[0].to), ms(frozeAt), ms(thawedAt),
		ms(healthy[1].from), ms(healthy[1].to), ms(killedAt), ms(backAt), ms(healthy[2].from), ms(healthy[2].to))

	// Every answer: no error, and in time (see holdLatency); every
	// control allowed as it is, without the store.
	for _, a := range slices.Concat(all, slices.Concat(controls...)) {
		switch {
		case a.err != nil:
			what := "a control"
			if a.key >= 0 {
				what = keys[a.key]
			}
			t.Fatalf("%s from process %d: %v", what, a.proc, a.err)
		case a.key < 0 && (!a.allowed || a.degraded):
			t.Fatalf("a control from process %d: allowed %v, degraded %v; want allowed, not degraded (no rule matches it)", a.proc, a.allowed, a.degraded)
		}
	}
	holdLatency(t, all, controls)

	// With Redis healthy, Redis decides: no breaker opens, and a degraded
	// answer is a late reply, which waited out the store's deadline — a
	// call refused or failed fails at once. (The store counts a connection
	// it could not open by the deadline as failed, not late: a busy
	// machine's new connection can take that long.)
	var nHealthy, nDegraded int
	for i, s := range healthy {
		for p := range procs {
			var n, degraded, early int
			quickest := redisstore.DefaultTimeout
			for _, a := range all {
				if a.proc != p || a.sent < s.from || a.done > s.to {
					continue
				}
				n++
				if !a.degraded {
					continue
				}
				degraded++
				if a.took() < redisstore.DefaultTimeout {
					early++
					quickest = min(quickest, a.took())
				}
			}
			delta := func(series string) float64 { return s.end[p].sum(series) - s.begin[p].sum(series) }
			opens, slow, failed := delta("bouncer_redis_breaker_opens_total{"), delta("bouncer_redis_slow_calls_total{"), delta("bouncer_redis_call_failures_total{")
			if opens != 0 {
				// A machine that holds most calls past the deadline makes
				// Redis too slow to use (lateTooLong), healthy or not:
				// the breaker may open then, and answers by policy at once
				// while it is open. It never opens for nothing.
				if slow+failed == 0 {
					t.Errorf("healthy span %d: process %d's breaker opened %.0f times with no call late or failed; want none", i, p, opens)
				}
				t.Logf("healthy span %d: process %d's breaker opened %.0f times, after %.0f late calls and %.0f failed: the machine held its calls past the deadline", i, p, opens, slow, failed)
				continue
			}
			if early > 0 {
				t.Errorf("healthy span %d: process %d gave %d degraded answers before the store's deadline %v (the quickest after %v): not late replies",
					i, p, early, redisstore.DefaultTimeout, quickest.Round(time.Millisecond))
			}
			nHealthy, nDegraded = nHealthy+n, nDegraded+degraded
			if float64(degraded) > slow+failed {
				t.Errorf("healthy span %d: process %d answered %d degraded, its store counted %.0f calls that missed the deadline and %.0f that failed; want no more degraded answers than those",
					i, p, degraded, slow, failed)
			}
			t.Logf("healthy span %d, process %d: %d answers, %d degraded; the store counted %.0f late calls, %.0f failed", i, p, n, degraded, slow, failed)
		}
	}
	// "Most calls late" is where a node stops being busy and becomes too
	// slow to use (the breaker's lateTooLong): short of that, Redis
	// decides most answers.
	if nHealthy > 0 && 2*nDegraded >= nHealthy {
		t.Errorf("%d of %d answers with Redis healthy were degraded; want fewer than half", nDegraded, nHealthy)
	}
	t.Logf("%d answers with Redis healthy, %d degraded (%.2f%%)", nHealthy, nDegraded, 100*float64(nDegraded)/float64(max(nHealthy, 1)))

	// Every degraded answer is by its rule's policy, and while Redis was
	// frozen and dead every key was answered so.
	for _, a := range all {
		switch {
		case !a.degraded:
		case keys[a.key] == "fail_allow" && !a.allowed:
			t.Errorf("a degraded answer of the allow rule denied (process %d, sent at %v)", a.proc, ms(a.sent))
		case keys[a.key] == "fail_deny" && a.allowed:
			t.Errorf("a degraded answer of the deny rule allowed (process %d, sent at %v)", a.proc, ms(a.sent))
		}
	}
	for _, phase := range []struct {
		name     string
		from, to time.Duration
	}{{"frozen", frozeAt, thawedAt}, {"killed", killedAt, backAt}} {
		seen := map[int]int{}
		for _, a := range all {
			if a.degraded && a.sent >= phase.from && a.sent < phase.to {
				seen[a.key]++
			}
		}
		for k, name := range keys {
			if seen[k] == 0 {
				t.Errorf("%s: no degraded answer for %s while Redis could not answer", phase.name, name)
			}
		}
		t.Logf("%s: degraded answers by key: %v", phase.name, seen)
	}

	// The limits held: in Redis across the three instances (before the
	// kill, and after it on Redis's empty state), and in each instance's
	// local store for the rules of the default policy.
	for k, name := range keys {
		var before, after []holdAnswer
		local := make([][]holdAnswer, procs)
		for _, a := range all {
			switch {
			case a.key != k || !a.allowed:
			case a.degraded:
				local[a.proc] = append(local[a.proc], a)
			case a.sent < killedAt:
				before = append(before, a)
			default:
				after = append(after, a)
			}
		}
		holdCheck(t, name+" in Redis before the kill", name, before, false)
		holdCheck(t, name+" in Redis after the restart", name, after, false)
		if !strings.HasPrefix(name, "fail_") {
			for p := range procs {
				holdCheck(t, fmt.Sprintf("%s in process %d's local store", name, p), name, local[p], true)
			}
		}
		t.Logf("%s: admitted %d in Redis before the kill, %d after the restart, %d/%d/%d locally", name, len(before), len(after), len(local[0]), len(local[1]), len(local[2]))
	}
	var degraded float64
	for _, m := range last {
		degraded += m.sum(`bouncer_decisions_total{domain="hold",result="degraded",rule="`)
	}
	if degraded == 0 {
		t.Error("bouncer_decisions_total counted no degraded decision, with Redis frozen and killed")
	}
}

// holdLatency asserts that no answer took longer than the store's
// deadline and a margin beyond the time the machine held a control caller
// meanwhile. Control callers ask for a descriptor that no rule matches,
// which never reaches the store; a turn of a control caller's loop (from
// one answer of its to the next) that took longer than the store's
// deadline was a stall of the machine — the race-enabled test binary's,
// gRPC's, a serve process's, the CPU they share — and a stall holds the
// answers as it holds the controls, while a store that waits for Redis
// past its deadline holds only the answers. An answer's allowance is the
// most that one control caller spent in such turns within the answer's
// own time; the margin covers a caller that waited for the CPU when the
// controls did not.
func holdLatency(t *testing.T, all []holdAnswer, controls [][]holdAnswer) {
	t.Helper()
	const margin = 250 * time.Millisecond
	bound := redisstore.DefaultTimeout + margin
	type turn struct{ from, to time.Duration }
	stalls := make([][]turn, len(controls)) // each control caller's turns longer than the deadline
	var slowest, longest time.Duration
	for g, cs := range controls {
		for i, c := range cs {
			tn := turn{c.sent, c.done}
			if i > 0 {
				tn.from = cs[i-1].done
			}
			longest = max(longest, tn.to-tn.from)
			if tn.to-tn.from > redisstore.DefaultTimeout {
				stalls[g] = append(stalls[g], tn)
			}
		}
	}
	var worst holdAnswer
	var worstHeld time.Duration
	over := 0
	for _, a := range all {
		slowest = max(slowest, a.took())
		if a.took() <= bound {
			continue
		}
		over++
		var held time.Duration
		for _, ts := range stalls {
			var h time.Duration
			for _, tn := range ts {
				h += max(min(tn.to, a.done)-max(tn.from, a.sent), 0)
			}
			held = max(held, h)
		}
		if over == 1 || a.took()-held > worst.took()-worstHeld {
			worst, worstHeld = a, held
		}
	}
	t.Logf("slowest answer %v, longest turn of a control caller %v; %d answers over %v", slowest.Round(time.Millisecond), longest.Round(time.Millisecond), over, bound)
	if over == 0 {
		return
	}
	beyond := worst.took() - worstHeld
	t.Logf("the most an answer took beyond the stalls of a control caller meanwhile: %v (took %v, stalled %v)", beyond.Round(time.Millisecond), worst.took().Round(time.Millisecond), worstHeld.Round(time.Millisecond))
	if beyond > bound {
		t.Errorf("an answer took %v (process %d, sent at %v), of which a control caller was stalled no more than %v: %v more than the store's deadline %v and a margin of %v allow",
			worst.took().Round(time.Millisecond), worst.proc, worst.sent.Round(time.Millisecond), worstHeld.Round(time.Millisecond), beyond.Round(time.Millisecond), redisstore.DefaultTimeout, margin)
	}
}

// holdBreakersClosed waits until every process has its Redis breaker
// closed (Redis answers again), and returns their metrics then and the
// time it returned: a healthy span begins.
func holdBreakersClosed(t *testing.T, admins []string, since func() time.Duration) ([]holdMetrics, time.Duration) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ms := scrapeAll(t, admins)
		closed := true
		for _, m := range ms {
			closed = closed && m.sum("bouncer_redis_connected") == 1 && m.sum("bouncer_redis_breaker_open{") == 0
		}
		if closed {
			return ms, since()
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis answers again, and a process's breaker is still open after 30s")
		}
		<-tick.C
	}
}

// holdCheck asserts that the admitted answers as (of one key, sorted or
// not) kept the limit of algorithm name at holdRate per second; loose
// (a local store, whose windows need not align with Redis's) allows any
// window's count in any span of its length.
func holdCheck(t *testing.T, what, name string, as []holdAnswer, loose bool) {
	t.Helper()
	slices.SortFunc(as, func(a, b holdAnswer) int { return a.send.Compare(b.send) })
	const period = time.Second
	// runs checks that every run i..j of the answers, decided whatever the
	// server's times within [send_i, the latest recv], admitted at most
	// most(span) of them.
	runs := func(most func(span time.Duration) int, limit string) {
		for i := range as {
			last := as[i].recv
			for j := i; j < len(as); j++ {
				if as[j].recv.After(last) {
					last = as[j].recv
				}
				span := last.Sub(as[i].send)
				if n := j - i + 1; n > most(span) {
					t.Errorf("%s: %d admitted within %v (sent from %s, received by %s), more than %s", what, n, span.Round(time.Millisecond),
						as[i].send.Format("15:04:05.000"), last.Format("15:04:05.000"), limit)
					for _, a := range as[max(i-5, 0):min(j+5, len(as))] {
						t.Logf("  sent %s received %s process %d remaining %d", a.send.Format("05.000"), a.recv.Format("05.000"), a.proc, a.remaining)
					}
					return
				}
			}
		}
	}
	switch {
	case strings.Contains(name, "bucket") || name == "gcra":
		runs(func(span time.Duration) int { return holdRate + int(span.Seconds()*holdRate) + 1 },
			fmt.Sprintf("burst %d + %d/s", holdRate, holdRate))
	case loose:
		runs(func(span time.Duration) int { return holdRate * (int(span/period) + 2) }, fmt.Sprintf("%d a window", holdRate))
	case name == "sliding_window_log":
		// Answers sent after send_i and received before send_i + period
		// were decided within one period.
		for i := range as {
			n := 0
			for j := i; j < len(as); j++ {
				if as[j].recv.Before(as[i].send.Add(period)) {
					n++
				}
			}
			if n > holdRate {
				t.Errorf("%s: %d admitted within %v of %v, more than %d", what, n, period, as[i].send.Format("15:04:05.000"), holdRate)
				return
			}
		}
	default:
		// Windows of a second aligned to the epoch: the answers sent and
		// received within one were decided in it.
		per := map[int64]int{}
		for _, a := range as {
			if w := a.send.UnixNano() / int64(period); a.recv.UnixNano()/int64(period) == w {
				per[w]++
			}
		}
		for w, n := range per {
			if n > holdRate {
				t.Errorf("%s: %d admitted in the window starting %v, more than %d", what, n, time.Unix(0, w*int64(period)).Format("15:04:05"), holdRate)
			}
		}
	}
}

// holdMetrics is one scrape of a process's /metrics: each sample's value
// by its series (name and labels).
type holdMetrics map[string]float64

// sum adds the samples whose series starts with prefix.
func (m holdMetrics) sum(prefix string) float64 {
	var sum float64
	for series, v := range m {
		if strings.HasPrefix(series, prefix) {
			sum += v
		}
	}
	return sum
}

// scrapeAll scrapes each admin listener's /metrics.
func scrapeAll(t *testing.T, admins []string) []holdMetrics {
	t.Helper()
	ms := make([]holdMetrics, len(admins))
	for i, admin := range admins {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = holdMetrics{}
		for line := range strings.Lines(string(body)) {
			series, value, ok := cutLast(strings.TrimSpace(line), " ")
			if !ok || strings.HasPrefix(series, "#") {
				continue
			}
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			ms[i][series] = v
		}
	}
	return ms
}
