//go:build unix

package redisstore_test

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

// The ACL tests run a private redis-server whose users have exactly the
// permissions that docs/redis.md gives (the line is read from the page, so
// that the docs and the test are one text), or that line less one.

// aclLine is the ACL SETUSER line of docs/redis.md, as its words.
func aclLine(t *testing.T) []string {
	t.Helper()
	page, err := os.ReadFile("../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := regexp.MustCompile("(?m)^ACL SETUSER bouncer .*$").FindAll(page, -1)
	if len(lines) != 1 {
		t.Fatalf("docs/redis.md: %d lines start with \"ACL SETUSER bouncer\", want 1", len(lines))
	}
	return strings.Fields(string(lines[0]))
}

// aclRedis is a private redis-server on loopback, and a client of its
// default user, which has every permission.
type aclRedis struct {
	addr  string
	admin rueidis.Client
}

// startACLRedis starts a redis-server on a free port above 20000 and
// stops it when t ends.
func startACLRedis(t *testing.T) *aclRedis {
	t.Helper()
	failureRequireRedis(t)
	for attempt := 0; ; attempt++ {
		port := 20000 + rand.IntN(10000)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err != nil {
			continue
		} else {
			l.Close()
		}
		r, err := runACLRedis(t, port)
		if err == nil {
			return r
		}
		if attempt == 4 {
			t.Fatal(err)
		}
	}
}

func runACLRedis(t *testing.T, port int) (*aclRedis, error) {
	srv, err := redistest.StartServer(port, t.TempDir())
	if err != nil {
		return nil, err
	}
	t.Cleanup(srv.Kill)
	r := &aclRedis{addr: srv.Addr()}
	r.admin = newClient(t, []string{r.addr})
	return r, nil
}

// user makes the user named by line (ACL SETUSER's words, PASSWORD for
// its password), with extra rules after it, and returns a client option
// that connects as it.
func (r *aclRedis) user(t *testing.T, line []string, extra ...string) rueidis.ClientOption {
	t.Helper()
	const password = "s3cret-acl-test"
	args := append(append([]string(nil), line[2:]...), extra...)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "PASSWORD", password)
	}
	ctx := context.Background()
	if err := r.admin.Do(ctx, r.admin.B().Arbitrary("ACL", "SETUSER").Args(args...).Build()).Error(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", strings.Join(args, " "), err)
	}
	co := redisstore.ClientOption([]string{r.addr})
	co.Username, co.Password = args[0], password
	return co
}

// aclPrefix is a fresh prefix that the documented key pattern,
// ~bouncer:*, covers.
func aclPrefix() string { return "bouncer:" + freshPrefix() }

// lockedBuffer is a log's destination, read while the store writes;
// errored is closed when it gets an ERROR line.
type lockedBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	errored chan struct{}
	once    sync.Once
}

func newLockedBuffer() *lockedBuffer { return &lockedBuffer{errored: make(chan struct{})} }

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bytes.Contains(p, []byte("level=ERROR")) {
		l.once.Do(func() { close(l.errored) })
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An ACL user with exactly the documented permissions runs everything the
// store does: the conformance suites (checks, refunds, resets, charges,
// async shares, at a pinned time), checks on Redis's TIME, the hybrid
// limiter's leases and async pushes, RLQS's demand sharing and an
// exchange of async shares; and its store reports nothing wrong.
func TestACLDocumentedUser(t *testing.T) {
	r := startACLRedis(t)
	co := r.user(t, aclLine(t))
	c, err := rueidis.NewClient(co)
	if err != nil {
		t.Fatalf("connecting as the documented user: %v", err)
	}
	t.Cleanup(c.Close)
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
			o := redisstore.Options{Prefix: aclPrefix()}
			redisstore.PinClock(&o, clock.Now)
			return newStore(t, c, o)
		})
	})
	t.Run("Shares", func(t *testing.T) {
		storetest.Shares(t, func(t *testing.T, clock *storetest.Clock) store.Sharer {
			o := redisstore.Options{Prefix: aclPrefix()}
			redisstore.PinClock(&o, clock.Now)
			return newStore(t, c, o)
		})
	})
	t.Run("Store", func(t *testing.T) {
		log := newLockedBuffer()
		co.InitAddress = []string{r.addr}
		s, err := redisstore.New(redisstore.Options{Client: co, Prefix: aclPrefix(), Buckets: 1, Timeout: 5 * time.Second,
			Logger: slog.New(slog.NewTextHandler(log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		aclWaitConnected(t, s)
		aclExercise(t, s)
		if h := s.Health(); h.Failures != 0 || h.LastErr != nil || h.Degraded() != nil {
			t.Errorf("health: %d failures, last %v, degraded %q; want none", h.Failures, h.LastErr, h.Degraded())
		}
		if strings.Contains(log.String(), "level=WARN") || strings.Contains(log.String(), "level=ERROR") {
			t.Errorf("the store logged trouble:\n%s", log.String())
		}
	})
}

// The documented user on a Cluster (ACL rules are per node: every node
// gets them): what a service runs is decided in Redis, and the store
// reports nothing wrong.
func TestACLDocumentedUserCluster(t *testing.T) {
	pr := startACLCluster(t)
	line := aclLine(t)
	const password = "s3cret-acl-test"
	args := append([]string{"ACL"}, line[1:]...)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "PASSWORD", password)
	}
	for i := range failureClusterSize {
		pr.mustCLI(t, pr.clusterBase+i, args...)
	}
	co := redisstore.ClientOption(pr.clusterAddrs)
	co.Username, co.Password = line[2], password
	log := newLockedBuffer()
	s, err := redisstore.New(redisstore.Options{Client: co, Prefix: aclPrefix(), Buckets: 1, Timeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	aclWaitConnected(t, s)
	aclExercise(t, s)
	if h := s.Health(); h.Failures != 0 || h.LastErr != nil || h.Degraded() != nil {
		t.Errorf("health: %d failures, last %v, degraded %q; want none", h.Failures, h.LastErr, h.Degraded())
	}
	if strings.Contains(log.String(), "level=WARN") || strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("the store logged trouble:\n%s", log.String())
	}

	// Without CLUSTER SLOTS the client cannot map the Cluster, and the
	// store, which cannot connect, says what to grant.
	for i := range failureClusterSize {
		pr.mustCLI(t, pr.clusterBase+i, append(args, "-cluster|slots")...)
	}
	log = newLockedBuffer()
	s, err = redisstore.New(redisstore.Options{Client: co, Timeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	select {
	case <-log.errored:
	case <-time.After(30 * time.Second):
		t.Fatalf("no ERROR line in 30s:\n%s", log.String())
	}
	const want = "the Redis user cannot CLUSTER SLOTS (NOPERM): grant +cluster|slots, see docs/redis.md#managed-redis"
	if !strings.Contains(log.String(), want) || !slicesContain(s.Health().Degraded(), want) {
		t.Errorf("log:\n%s\nhealth %q; want both to say %q", log.String(), s.Health().Degraded(), want)
	}
}

// startACLCluster starts a private set of servers (scripts/redis-up.sh:
// a standalone server and a 3-master Cluster) on free ports above 20000,
// and stops it when t ends.
func startACLCluster(t *testing.T) *privateRedis {
	t.Helper()
	failureRequireRedis(t)
	scripts, err := filepath.Abs(filepath.Join("..", "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	free := func(p int) bool {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			l.Close()
		}
		return err == nil
	}
	for attempt := 0; attempt < 20; attempt++ {
		k := rand.IntN(200)
		pr := &privateRedis{dir: t.TempDir(), scripts: scripts, port: 20000 + k, clusterBase: 21000 + 10*k} // bus ports 31000..33005
		ok := free(pr.port)
		for i := 0; ok && i < failureClusterSize; i++ {
			ok = free(pr.clusterBase+i) && free(pr.clusterBase+i+10000)
			pr.clusterAddrs = append(pr.clusterAddrs, "127.0.0.1:"+strconv.Itoa(pr.clusterBase+i))
		}
		if !ok {
			continue
		}
		out, err := pr.script(90*time.Second, "redis-up.sh")
		t.Cleanup(pr.down(t))
		if err != nil {
			t.Fatalf("redis-up.sh (ports %d, %d): %v\n%s", pr.port, pr.clusterBase, err, out)
		}
		return pr
	}
	t.Fatal("no free ports above 20000 for a private Redis set")
	return nil
}

// aclExercise runs on s (a store of one bucket), on Redis's clock, what a
// service runs: strict checks, a refund and a reset, lease and async
// limits through a hybrid limiter, RLQS's demand sharing, and an exchange
// of async shares; each must be decided in Redis.
func aclExercise(t *testing.T, s *redisstore.Store) {
	t.Helper()
	ctx := t.Context()
	limit := func(name string, alg bouncer.Algorithm, mode bouncer.Mode) bouncer.Limit {
		l := bouncer.Limit{Name: name, Algorithm: alg, Rate: 100, Period: time.Minute, Mode: mode}
		if alg == bouncer.TokenBucket {
			l.Burst = 100
		}
		return l
	}
	h := hybrid.New(s, nil, hybrid.Options{Manual: true})
	defer h.Close()
	for _, l := range []bouncer.Limit{
		limit("strict", bouncer.TokenBucket, bouncer.Strict),
		limit("log", bouncer.SlidingWindowLog, bouncer.Strict),
		limit("concurrency", bouncer.Concurrency, bouncer.Strict),
		limit("lease", bouncer.TokenBucket, bouncer.Lease),
		limit("async", bouncer.SlidingWindowCounter, bouncer.Async),
	} {
		req := hybridRequest("k", 1, l)
		for range 3 {
			if d, err := h.Check(ctx, req); err != nil || !d.Allowed || d.Degraded {
				t.Fatalf("%s: check: %+v, %v; want allowed in Redis", l.Name, d, err)
			}
		}
		if err := h.Refund(ctx, req); err != nil {
			t.Fatalf("%s: refund: %v", l.Name, err)
		}
		h.Tick(ctx) // async pushes its count, leases that end are given back
		if err := s.Reset(ctx, req); err != nil {
			t.Fatalf("%s: reset: %v", l.Name, err)
		}
	}
	// In a store of one bucket, a key whose state expires before the
	// hash's TTL makes the library sample the hash for expired fields.
	l := limit("sample", bouncer.TokenBucket, bouncer.Strict)
	for _, r := range []bouncer.Request{hybridRequest("deep", 100, l), hybridRequest("shallow", 1, l)} {
		if d, err := s.Check(ctx, r); err != nil || !d.Allowed || d.Degraded {
			t.Fatalf("%s: check: %+v, %v; want allowed in Redis", r.Keys[0].Key, d, err)
		}
	}
	aclDemands(t, s)
	aclShares(t, s)
}

// A user without one of the permissions the store checks when it connects
// gets, at start, a log line and a health reason that name what is
// missing and how to grant it.
func TestACLMissingPermission(t *testing.T) {
	r := startACLRedis(t)
	line := aclLine(t)
	for _, tc := range []struct {
		name  string
		extra []string // rules after the documented line
		want  string
	}{
		{"function-load", []string{"-function|load"}, "the Redis user cannot FUNCTION LOAD (NOPERM): grant +function|load, see docs/redis.md#managed-redis"},
		{"fcall", []string{"-fcall"}, "the Redis user cannot FCALL (NOPERM): grant +fcall, see docs/redis.md#managed-redis"},
		{"time", []string{"-time"}, "the Redis user cannot run every command the function library calls (NOPERM)"},
		{"keys", []string{"resetkeys", "~other:*"}, "the Redis user cannot use the keys bouncer:* (NOPERM): grant ~bouncer:*, see docs/redis.md#managed-redis"},
		{"ping", []string{"-ping"}, "the Redis user cannot PING (NOPERM): grant +ping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A library loaded by an earlier case would serve a user that
			// cannot load it.
			if err := r.admin.Do(t.Context(), r.admin.B().FunctionFlush().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			co := r.user(t, line, tc.extra...)
			log := newLockedBuffer()
			s, err := redisstore.New(redisstore.Options{Client: co, Timeout: 5 * time.Second,
				Logger: slog.New(slog.NewTextHandler(log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			aclWaitConnected(t, s)
			if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), tc.want) {
				t.Errorf("log:\n%s\nwant an ERROR line with %q", log.String(), tc.want)
			}
			h := s.Health()
			if !slicesContain(h.Degraded(), tc.want) || h.SetupError == nil {
				t.Errorf("health: degraded %q, SetupError %v; want a reason with %q", h.Degraded(), h.SetupError, tc.want)
			}
		})
	}
}

// A user who may not load the library while another client has loaded
// it is warned, not degraded: the library serves. A user granted a
// missing permission after the store connected is degraded no more once
// a call succeeds.
func TestACLPermissionLater(t *testing.T) {
	r := startACLRedis(t)
	line := aclLine(t)
	newACLStore := func(t *testing.T, co rueidis.ClientOption) (*redisstore.Store, *lockedBuffer) {
		t.Helper()
		log := newLockedBuffer()
		s, err := redisstore.New(redisstore.Options{Client: co, Timeout: 5 * time.Second,
			Logger: slog.New(slog.NewTextHandler(log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		aclWaitConnected(t, s)
		return s, log
	}
	check := func(t *testing.T, s *redisstore.Store) {
		t.Helper()
		l := bouncer.Limit{Name: "l", Algorithm: bouncer.GCRA, Rate: 10, Period: time.Second, Burst: 10}
		if d, err := s.Check(t.Context(), hybridRequest("k", 1, l)); err != nil || !d.Allowed || d.Degraded {
			t.Fatalf("check: %+v, %v; want allowed in Redis", d, err)
		}
	}
	t.Run("loaded-by-another", func(t *testing.T) {
		newACLStore(t, r.user(t, line)) // loads the library
		s, log := newACLStore(t, r.user(t, line, "-function|load"))
		want := "the Redis user cannot FUNCTION LOAD (NOPERM): grant +function|load"
		if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), want) || strings.Contains(log.String(), "level=ERROR") {
			t.Errorf("log:\n%s\nwant a WARN line with %q and no ERROR", log.String(), want)
		}
		if h := s.Health(); h.SetupError != nil || h.Degraded() != nil {
			t.Errorf("health: SetupError %v, degraded %q; want none", h.SetupError, h.Degraded())
		}
		check(t, s)
	})
	t.Run("granted", func(t *testing.T) {
		s, _ := newACLStore(t, r.user(t, line, "-fcall"))
		if h := s.Health(); h.SetupError == nil {
			t.Fatal("no SetupError without +fcall")
		}
		r.user(t, line) // +fcall again
		check(t, s)
		if h := s.Health(); h.SetupError != nil || h.Degraded() != nil {
			t.Errorf("health after a check in Redis: SetupError %v, degraded %q; want none", h.SetupError, h.Degraded())
		}
	})
}

// aclWaitConnected waits up to 30s for s to connect.
func aclWaitConnected(t *testing.T, s *redisstore.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.WaitConnected(ctx); err != nil {
		t.Fatalf("not connected after 30s: %v (%v)", err, s.Health().ConnectError)
	}
}

// slicesContain reports whether a line of lines contains s.
func slicesContain(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
