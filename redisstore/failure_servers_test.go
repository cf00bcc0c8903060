//go:build unix

package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The failure tests stop, kill, freeze and reshard Redis servers, so they
// never use the shared servers of BOUNCER_REDIS_ADDR and
// BOUNCER_REDIS_CLUSTER_ADDRS: each starts a private set of its own (a
// standalone server and a 3-master/3-replica Cluster) with the project's
// scripts, on free ports and in a state directory of its own, and stops it
// when it is done.

// privateRedis is a private set of servers started by scripts/redis-up.sh.
type privateRedis struct {
	dir          string // state directory
	scripts      string // the repository's scripts directory
	port         int    // the standalone server's
	clusterBase  int    // the first of the Cluster's 6 ports
	clusterAddrs []string
	frozen       []int // pids of nodes freeze stopped
}

const failureClusterSize = 6 // scripts/redis-common.sh: 3 masters + 3 replicas

// failureRequireRedis skips t (fails it under BOUNCER_REQUIRE_REDIS) when
// the Redis tools the scripts need are missing.
func failureRequireRedis(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"redis-server", "redis-cli", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("BOUNCER_REQUIRE_REDIS") != "" {
				t.Fatalf("%s is not on PATH; run scripts/redis-up.sh (it installs Redis)", tool)
			}
			t.Skipf("%s is not on PATH; the failure tests need a private Redis (scripts/redis-up.sh installs it)", tool)
		}
	}
}

var (
	failurePortsMu  sync.Mutex
	failurePortsUse = map[int]bool{} // ports this test binary has handed out
)

// portFree reports whether port p is neither handed out by this test
// binary nor listened on; failurePortsMu is held.
func portFree(p int) bool {
	if failurePortsUse[p] {
		return false
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// failureFreePorts picks a standalone port and a Cluster base port whose ports
// (and the Cluster's bus ports, +10000) nothing listens on, away from the
// shared servers' defaults, starting at a random place so that concurrent
// test binaries rarely try the same ones.
func failureFreePorts(t testing.TB) (port, base int) {
	t.Helper()
	failurePortsMu.Lock()
	defer failurePortsMu.Unlock()
	const slots = 200
	start := rand.IntN(slots)
	for i := range slots {
		k := (start + i) % slots
		port, base = 16500+k, 17200+10*k // bus ports 27200..29205
		ok := portFree(port)
		for j := 0; ok && j < failureClusterSize; j++ {
			ok = portFree(base+j) && portFree(base+j+10000)
		}
		if ok {
			failurePortsUse[port] = true
			for j := range failureClusterSize {
				failurePortsUse[base+j] = true
			}
			return port, base
		}
	}
	t.Fatal("no free ports for a private Redis set")
	return 0, 0
}

// startPrivateRedis starts a private set for t and stops it (removing its
// state) when t ends.
func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	failureRequireRedis(t)
	scripts, err := filepath.Abs(filepath.Join("..", "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		dir, err := os.MkdirTemp("", "bouncer-redis-failure-")
		if err != nil {
			t.Fatal(err)
		}
		port, base := failureFreePorts(t)
		pr := &privateRedis{dir: dir, scripts: scripts, port: port, clusterBase: base}
		for i := range failureClusterSize {
			pr.clusterAddrs = append(pr.clusterAddrs, "127.0.0.1:"+strconv.Itoa(base+i))
		}
		start := time.Now()
		out, err := pr.script(90*time.Second, "redis-up.sh")
		if err == nil {
			t.Logf("private Redis up in %v: standalone %d, cluster %d-%d, state in %s",
				time.Since(start).Round(time.Millisecond), port, base, base+failureClusterSize-1, dir)
			t.Cleanup(pr.down(t))
			return pr
		}
		lastErr = fmt.Errorf("redis-up.sh (ports %d, %d): %v\n%s", port, base, err, out)
		pr.down(t)() // whatever it started
	}
	t.Fatal(lastErr)
	return nil
}

// down returns the cleanup that stops the set and removes its state.
func (pr *privateRedis) down(t testing.TB) func() {
	return func() {
		pr.resumeAll(t)
		if out, err := pr.script(60*time.Second, "redis-down.sh"); err != nil {
			t.Errorf("redis-down.sh: %v\n%s", err, out)
		}
		os.RemoveAll(pr.dir) // redis-down.sh leaves it only if it holds other files
	}
}

// env is the environment of the scripts: this set's directory and ports,
// never the shared servers'.
func (pr *privateRedis) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BOUNCER_REDIS_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"BOUNCER_REDIS_DIR="+pr.dir,
		"BOUNCER_REDIS_PORT="+strconv.Itoa(pr.port),
		"BOUNCER_REDIS_CLUSTER_BASE_PORT="+strconv.Itoa(pr.clusterBase),
		"BOUNCER_REDIS_WAIT_SECS=30",
		"BOUNCER_REDIS_SENTINEL_BASE_PORT=0", // no Sentinel set: sentinel_test.go starts its own
	)
}

// script runs one of the scripts with this set's environment.
func (pr *privateRedis) script(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(pr.scripts, name)}, args...)...)
	cmd.Env = pr.env()
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// node runs scripts/redis-node.sh CMD [PORT] on this set.
func (pr *privateRedis) node(t testing.TB, cmd string, port ...int) {
	t.Helper()
	args := []string{cmd}
	for _, p := range port {
		args = append(args, strconv.Itoa(p))
	}
	if out, err := pr.script(60*time.Second, "redis-node.sh", args...); err != nil {
		t.Fatalf("redis-node.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// cli runs one redis-cli command against the node on port and returns its
// output with CRs and the trailing newline removed.
func (pr *privateRedis) cli(port int, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...)
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	s := strings.TrimRight(strings.ReplaceAll(string(out), "\r", ""), "\n")
	if err != nil {
		return s, fmt.Errorf("redis-cli -p %d %s: %w", port, strings.Join(args, " "), err)
	}
	if strings.HasPrefix(s, "ERR") || strings.HasPrefix(s, "(error)") {
		return s, fmt.Errorf("redis-cli -p %d %s: %s", port, strings.Join(args, " "), s)
	}
	return s, nil
}

func (pr *privateRedis) mustCLI(t testing.TB, port int, args ...string) string {
	t.Helper()
	out, err := pr.cli(port, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pid is the process id of the node on port, from its pidfile.
func (pr *privateRedis) pid(t testing.TB, port int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pr.dir, strconv.Itoa(port), "redis.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("bad pidfile of node %d: %q", port, b)
	}
	return pid
}

var failureFrozenMu sync.Mutex

// freeze stops (SIGSTOP) the node on port: it keeps its connections but
// answers nothing, like a server stuck in a long command or a paused VM.
// resume or the set's cleanup sends SIGCONT.
func (pr *privateRedis) freeze(t testing.TB, port int) {
	t.Helper()
	pid := pr.pid(t, port)
	failureFrozenMu.Lock()
	defer failureFrozenMu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP node %d (pid %d): %v", port, pid, err)
	}
	pr.frozen = append(pr.frozen, pid)
}

// resumeAll lets every frozen node of the set run again.
func (pr *privateRedis) resumeAll(t testing.TB) {
	failureFrozenMu.Lock()
	defer failureFrozenMu.Unlock()
	for _, pid := range pr.frozen {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Logf("SIGCONT pid %d: %v", pid, err)
		}
	}
	pr.frozen = nil
}

// failureClusterNode is one line of CLUSTER NODES.
type failureClusterNode struct {
	id     string
	port   int
	master bool
	failed bool
	slots  [][2]int // owned slot ranges, inclusive
}

// clusterNodes is the Cluster as the node on port sees it.
func (pr *privateRedis) clusterNodes(t testing.TB, port int) []failureClusterNode {
	t.Helper()
	out := pr.mustCLI(t, port, "CLUSTER", "NODES")
	var nodes []failureClusterNode
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		n := failureClusterNode{id: f[0]}
		hostport := strings.SplitN(f[1], "@", 2)[0]
		if _, p, err := net.SplitHostPort(hostport); err == nil {
			n.port, _ = strconv.Atoi(p)
		}
		flags := "," + f[2] + ","
		n.master = strings.Contains(flags, ",master,")
		n.failed = strings.Contains(flags, ",fail,") || strings.Contains(flags, ",fail?,")
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // [slot->-id] / [slot-<-id]: a migration in progress
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if isRange {
				b, _ = strconv.Atoi(hi)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// owner is the master that owns slot, as the node on port sees it.
func (pr *privateRedis) owner(t testing.TB, port, slot int) failureClusterNode {
	t.Helper()
	for _, n := range pr.clusterNodes(t, port) {
		if !n.master {
			continue
		}
		for _, r := range n.slots {
			if slot >= r[0] && slot <= r[1] {
				return n
			}
		}
	}
	t.Fatalf("node %d knows no owner of slot %d", port, slot)
	return failureClusterNode{}
}

// liveClusterPort is a Cluster port whose node answers.
func (pr *privateRedis) liveClusterPort(t testing.TB) int {
	t.Helper()
	for i := range failureClusterSize {
		if out, err := pr.cli(pr.clusterBase+i, "PING"); err == nil && out == "PONG" {
			return pr.clusterBase + i
		}
	}
	t.Fatal("no node of the private cluster answers")
	return 0
}

// slotsOf returns the Cluster slots of the Redis keys starting with
// prefix+":", found by scanning every master.
func (pr *privateRedis) slotsOf(t testing.TB, prefix string) map[int]bool {
	t.Helper()
	slots := map[int]bool{}
	live := pr.liveClusterPort(t)
	for _, n := range pr.clusterNodes(t, live) {
		if !n.master || n.failed {
			continue
		}
		out := pr.mustCLI(t, n.port, "--scan", "--pattern", prefix+":*")
		for _, k := range strings.Fields(out) {
			s, err := strconv.Atoi(pr.mustCLI(t, n.port, "CLUSTER", "KEYSLOT", k))
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %s: %v", k, err)
			}
			slots[s] = true
		}
	}
	if len(slots) == 0 {
		t.Fatalf("no keys with prefix %q in the cluster", prefix)
	}
	return slots
}
