//go:build unix

package redisstore_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/internal/redistest"
)

// The failover tests kill and switch masters, so they never use the
// shared Sentinel set of BOUNCER_REDIS_SENTINEL_ADDRS: each starts a
// private set of its own with scripts/redis-sentinel.sh, on free ports
// above 20000 and in a state directory of its own, and stops it when it is
// done.

// privateSentinel is a private Sentinel set: a master, its replica and
// three sentinels on ports base..base+4.
type privateSentinel struct {
	dir     string
	scripts string
	base    int
	set     redistest.Sentinel
}

// The users scripts/redis-sentinel.sh gives every set.
const (
	sentinelMasterSet      = "bouncer"
	sentinelUser           = "sentinel"
	sentinelPassword       = "bouncer-sentinel-test-password"
	sentinelMasterUser     = "bouncer"
	sentinelMasterPassword = "bouncer-master-test-password"
)

// sentinelFreeBase picks 5 consecutive free ports from a random place
// between 22000 and 26000, away from every other test's.
func sentinelFreeBase(t testing.TB) int {
	t.Helper()
	failurePortsMu.Lock()
	defer failurePortsMu.Unlock()
	const slots = 800
	start := rand.IntN(slots)
	for i := range slots {
		base := 22000 + 5*((start+i)%slots)
		ok := true
		for j := 0; ok && j < 5; j++ {
			ok = portFree(base + j)
		}
		if ok {
			for j := range 5 {
				failurePortsUse[base+j] = true
			}
			return base
		}
	}
	t.Fatal("no free ports for a private Sentinel set")
	return 0
}

// startPrivateSentinel starts a private set for t and stops it (removing
// its state) when t ends.
func startPrivateSentinel(t testing.TB) *privateSentinel {
	t.Helper()
	failureRequireRedis(t)
	scripts, err := filepath.Abs(filepath.Join("..", "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "bouncer-redis-sentinel-")
	if err != nil {
		t.Fatal(err)
	}
	ps := &privateSentinel{dir: dir, scripts: scripts, base: sentinelFreeBase(t)}
	t.Cleanup(func() {
		if out, err := ps.script(60*time.Second, "down"); err != nil {
			t.Errorf("redis-sentinel.sh down: %v\n%s", err, out)
		}
		os.RemoveAll(dir)
	})
	start := time.Now()
	if out, err := ps.script(90*time.Second, "up"); err != nil {
		t.Fatalf("redis-sentinel.sh up (base port %d): %v\n%s", ps.base, err, out)
	}
	ps.set = redistest.Sentinel{
		MasterSet: sentinelMasterSet,
		User:      sentinelUser, Password: sentinelPassword,
		MasterUser: sentinelMasterUser, MasterPassword: sentinelMasterPassword,
	}
	for p := ps.base + 2; p <= ps.base+4; p++ {
		ps.set.Addrs = append(ps.set.Addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	t.Logf("private Sentinel set up in %v: data nodes %d-%d, sentinels %d-%d, state in %s",
		time.Since(start).Round(time.Millisecond), ps.base, ps.base+1, ps.base+2, ps.base+4, dir)
	return ps
}

// script runs scripts/redis-sentinel.sh with this set's environment.
func (ps *privateSentinel) script(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(ps.scripts, "redis-sentinel.sh")}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BOUNCER_REDIS_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"BOUNCER_REDIS_DIR="+ps.dir,
		"BOUNCER_REDIS_SENTINEL_BASE_PORT="+strconv.Itoa(ps.base),
		"BOUNCER_REDIS_WAIT_SECS=30",
	)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs the script and fails t if it fails; it returns its output.
func (ps *privateSentinel) must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := ps.script(60*time.Second, args...)
	if err != nil {
		t.Fatalf("redis-sentinel.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// master is the master's port, as the sentinels name it.
func (ps *privateSentinel) master(t testing.TB) int {
	t.Helper()
	out := ps.must(t, "master")
	lines := strings.Split(out, "\n")
	p, err := strconv.Atoi(lines[len(lines)-1])
	if err != nil {
		t.Fatalf("redis-sentinel.sh master: %q", out)
	}
	return p
}

// switches watches the set's first sentinel for +switch-master and sends
// the instant each one arrives, until t ends. It returns once subscribed.
func (ps *privateSentinel) switches(t testing.TB) <-chan time.Time {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: ps.set.Addrs[:1], Username: ps.set.User, Password: ps.set.Password, DisableCache: true,
	})
	if err != nil {
		t.Fatalf("connecting to sentinel %s: %v", ps.set.Addrs[0], err)
	}
	ch := make(chan time.Time, 16)
	subscribed := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once // the hook also sees the unsubscribe, and a resubscribe
		sub := rueidis.WithOnSubscriptionHook(ctx, func(rueidis.PubSubSubscription) { once.Do(func() { close(subscribed) }) })
		c.Receive(sub, c.B().Subscribe().Channel("+switch-master").Build(), func(rueidis.PubSubMessage) {
			select {
			case ch <- time.Now():
			default:
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done; c.Close() })
	select {
	case <-subscribed:
	case <-done:
		t.Fatal("subscribing to +switch-master failed")
	case <-time.After(10 * time.Second):
		t.Fatal("not subscribed to +switch-master within 10s")
	}
	return ch
}

// dataCLI runs one redis-cli command on the data node on port as the
// master's user.
func (ps *privateSentinel) dataCLI(t testing.TB, port int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port),
		"--user", ps.set.MasterUser, "--pass", ps.set.MasterPassword, "--no-auth-warning"}, args...)...)
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	s := strings.TrimSpace(strings.ReplaceAll(string(out), "\r", ""))
	if err != nil || strings.HasPrefix(s, "ERR") || strings.HasPrefix(s, "WRONGPASS") {
		t.Fatalf("redis-cli -p %d %s: %q, %v", port, strings.Join(args, " "), s, err)
	}
	return s
}

// setBoth runs CONFIG SET name value on both data nodes.
func (ps *privateSentinel) setBoth(t testing.TB, name, value string) {
	t.Helper()
	for _, p := range []int{ps.base, ps.base + 1} {
		ps.dataCLI(t, p, "CONFIG", "SET", name, value)
	}
}
