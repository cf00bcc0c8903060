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
	key        int // index in holdKeys
	proc       int
	send, recv time.Time
	allowed    bool
	degraded   bool
	remaining  uint32
	err        error
}

func holdKeys() []string { return append(slices.Clone(holdAlgorithms), "fail_allow", "fail_deny") }

// Three `bouncer serve` processes with default flags share one real
// Redis under a load that saturates the machine. While Redis is healthy,
// no decision is degraded and every key's limit holds across the three
// (the bucket bound for buckets, the window's rate per window). Redis is
// then frozen (DEBUG SLEEP) and later killed mid-run: every answer comes
// within the store's deadline and a margin, by each rule's policy (local
// by default: each instance limits on its own; allow; deny), and once
// Redis is back (empty, after the kill) it decides again and the limits
// hold again.
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
	const procs, callersEach = 3, 32
	var clients []pb.RateLimitServiceClient
	var admins []string
	for range procs {
		g, a := freeAddr(t), freeAddr(t)
		startServeBinary(t, bin, "--config", dir, "--store", "redis://"+redis.addr(), "--grpc-addr", g, "--http-addr", "", "--admin-addr", a)
		clients, admins = append(clients, rlsClient(t, g)), append(admins, a)
	}
	keys := holdKeys()

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	answers := make([][]holdAnswer, procs*callersEach)
	for p := range procs {
		for g := range callersEach {
			slot := p*callersEach + g
			wg.Go(func() {
				for i := g; ctx.Err() == nil; i++ {
					k := i % len(keys)
					cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					// Wall-clock times (no monotonic reading), the clock
					// Redis decides on: a step of the system clock moves
					// both alike.
					send := time.Now().Round(0)
					resp, degraded, err := decide(cctx, clients[p], "hold", "alg="+keys[k])
					recv := time.Now().Round(0)
					cancel()
					a := holdAnswer{key: k, proc: p, send: send, recv: recv, degraded: degraded, err: err}
					if err == nil {
						a.allowed = resp.OverallCode == pb.RateLimitResponse_OK
						if len(resp.Statuses) > 0 {
							a.remaining = resp.Statuses[0].LimitRemaining
						}
					}
					answers[slot] = append(answers[slot], a)
				}
			})
		}
	}
	run := func(d time.Duration) { <-time.After(d) }

	start := time.Now()
	run(3 * time.Second)
	// How loaded the machine is: the store checks that took longer than
	// 5 ms, the deadline before it was chosen from measurements (a busy
	// machine's calls then missed it now and then, and were degraded).
	var checks, within5ms float64
	for _, a := range admins {
		checks += holdMetric(t, a, "bouncer_store_check_seconds_count", `outcome="ok"`)
		within5ms += holdMetric(t, a, "bouncer_store_check_seconds_bucket", `outcome="ok",le="0.005"`)
	}
	t.Logf("store checks with Redis healthy: %.0f, of which %.0f (%.2f%%) took over 5 ms", checks, checks-within5ms, 100*(checks-within5ms)/max(checks, 1))
	frozeAt := time.Now()
	<-redis.freeze(t, 1500*time.Millisecond)
	thawedAt := time.Now()
	run(1500 * time.Millisecond)
	killedAt := time.Now()
	redis.kill(t)
	run(1500 * time.Millisecond)
	redis.start(t)
	backAt := time.Now()
	run(2500 * time.Millisecond)
	stop()
	wg.Wait()
	end := time.Now()

	var all []holdAnswer
	for _, as := range answers {
		all = append(all, as...)
	}
	t.Logf("started at %s", start.Format("15:04:05.000"))
	t.Logf("%d answers in %v: healthy until %v, frozen %v–%v, killed at %v, back at %v",
		len(all), end.Sub(start).Round(time.Millisecond), frozeAt.Sub(start).Round(time.Millisecond),
		frozeAt.Sub(start).Round(time.Millisecond), thawedAt.Sub(start).Round(time.Millisecond),
		killedAt.Sub(start).Round(time.Millisecond), backAt.Sub(start).Round(time.Millisecond))

	// Every answer: no error, within the deadline and a margin.
	const margin = 250 * time.Millisecond
	bound := redisstore.DefaultTimeout + margin
	var slowest time.Duration
	for _, a := range all {
		if a.err != nil {
			t.Fatalf("%s from process %d: %v", keys[a.key], a.proc, a.err)
		}
		slowest = max(slowest, a.recv.Sub(a.send))
	}
	t.Logf("slowest answer %v (bound %v)", slowest.Round(time.Millisecond), bound)
	if slowest > bound {
		t.Errorf("an answer took %v, more than the store's deadline %v and a margin of %v", slowest.Round(time.Millisecond), redisstore.DefaultTimeout, margin)
	}

	// Healthy: not one degraded decision, before the freeze and once
	// Redis answers again (a second after it thawed, and after it came
	// back).
	settle := time.Second
	healthy := func(a holdAnswer) bool {
		return a.recv.Before(frozeAt) ||
			a.send.After(thawedAt.Add(settle)) && a.recv.Before(killedAt) ||
			a.send.After(backAt.Add(settle))
	}
	var nHealthy, degradedHealthy int
	for _, a := range all {
		if healthy(a) {
			nHealthy++
			if a.degraded {
				degradedHealthy++
			}
		}
	}
	if degradedHealthy > 0 {
		t.Errorf("%d of %d answers with Redis healthy were degraded; want none", degradedHealthy, nHealthy)
	}
	t.Logf("%d answers with Redis healthy, %d degraded", nHealthy, degradedHealthy)

	// While Redis was frozen and dead: answers by policy, marked.
	for _, phase := range []struct {
		name     string
		from, to time.Time
	}{{"frozen", frozeAt, thawedAt}, {"killed", killedAt, backAt}} {
		seen := map[int]int{}
		for _, a := range all {
			if !a.degraded || a.send.Before(phase.from) || a.recv.After(phase.to) {
				continue
			}
			seen[a.key]++
			switch keys[a.key] {
			case "fail_allow":
				if !a.allowed {
					t.Errorf("%s: a degraded answer of the allow rule denied", phase.name)
				}
			case "fail_deny":
				if a.allowed {
					t.Errorf("%s: a degraded answer of the deny rule allowed", phase.name)
				}
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
			case a.send.Before(killedAt):
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
	for _, a := range admins {
		degraded += holdMetric(t, a, "bouncer_decisions_total", `domain="hold",result="degraded",rule="`)
	}
	if degraded == 0 {
		t.Error("bouncer_decisions_total counted no degraded decision, with Redis frozen and killed")
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

// holdMetric sums the samples of name whose labels start with prefix on
// an admin listener's /metrics.
func holdMetric(t *testing.T, admin, name, prefix string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for line := range strings.Lines(string(body)) {
		series, value, ok := cutLast(strings.TrimSpace(line), " ")
		if !ok || !strings.HasPrefix(series, name+"{"+prefix) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}
