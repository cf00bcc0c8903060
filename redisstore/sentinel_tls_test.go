//go:build unix

package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/storetest"
)

// The Sentinel-over-TLS tests run against Sentinel sets of their own
// (redistest.StartTLSSentinel): every server on a TLS port only, with
// ACL users whose passwords differ between the sentinels and the data
// nodes. One set requires client certificates everywhere (mutual TLS),
// the other only verifies the servers (the client gives the CA alone).
// Each starts the first time a test asks for it; TestMain stops them.
var tlsSentinels struct {
	mu   sync.Mutex
	dir  string
	sets map[string]*redistest.TLSSentinel // by mode name
	errs map[string]error
}

// sentinelTLSMode is how a Sentinel set's servers treat client
// certificates, and the TLS files a store gives them.
type sentinelTLSMode struct {
	name, authClients string
	files             func(*redistest.TLSSentinel) *redisstore.TLSFiles
}

var sentinelTLSModes = []sentinelTLSMode{
	{"mutual", "yes", func(s *redistest.TLSSentinel) *redisstore.TLSFiles { return mutualTLS(s.TLSServers) }},
	{"ca-only", "no", func(s *redistest.TLSSentinel) *redisstore.TLSFiles { return &redisstore.TLSFiles{CA: s.Certs.CAFile} }},
}

// sharedTLSSentinel returns the shared Sentinel set of mode m.
func sharedTLSSentinel(t testing.TB, m sentinelTLSMode) *redistest.TLSSentinel {
	t.Helper()
	failureRequireRedis(t)
	tlsSentinels.mu.Lock()
	defer tlsSentinels.mu.Unlock()
	if tlsSentinels.sets == nil {
		tlsSentinels.sets, tlsSentinels.errs = map[string]*redistest.TLSSentinel{}, map[string]error{}
	}
	if s, ok := tlsSentinels.sets[m.name]; ok {
		return s
	}
	if err := tlsSentinels.errs[m.name]; err != nil {
		t.Fatal(err)
	}
	if tlsSentinels.dir == "" {
		dir, err := os.MkdirTemp("", "bouncer-redis-tls-sentinel-")
		if err != nil {
			t.Fatal(err)
		}
		tlsSentinels.dir = dir
	}
	s, err := redistest.StartTLSSentinel(filepath.Join(tlsSentinels.dir, m.name), m.authClients)
	if err != nil {
		tlsSentinels.errs[m.name] = err
		t.Fatalf("starting a TLS Sentinel set (%s): %v", m.name, err)
	}
	tlsSentinels.sets[m.name] = s
	return s
}

func stopTLSSentinels() {
	tlsSentinels.mu.Lock()
	defer tlsSentinels.mu.Unlock()
	for _, s := range tlsSentinels.sets {
		s.Stop()
	}
	if tlsSentinels.dir != "" {
		os.RemoveAll(tlsSentinels.dir)
	}
}

// sentinelTLSURL is the rediss:// URL of s's master set, database db:
// the master's user in the URL, the sentinels' in the query.
func sentinelTLSURL(s *redistest.TLSSentinel, db int) string {
	u := url.URL{Scheme: "rediss", User: url.UserPassword(s.Set.MasterUser, s.Set.MasterPassword),
		Host: s.Set.Addrs[0], Path: "/" + strconv.Itoa(db)}
	u.RawQuery = url.Values{"master_set": {s.Set.MasterSet}, "addr": s.Set.Addrs[1:],
		"sentinel_username": {s.Set.User}, "sentinel_password": {s.Set.Password}}.Encode()
	return u.String()
}

// The conformance suite through Sentinel over mutual TLS, in database 2,
// from a URL that ParseURL reads. (The set that takes the CA alone runs
// TestDatabaseNumber: TLS changes how the store connects, not what it
// decides, and a second run of the suite would double its 14 s.)
func TestConformanceSentinelTLS(t *testing.T) {
	m := sentinelTLSModes[0]
	set := sharedTLSSentinel(t, m)
	// Once here rather than in each of the suite's stores, should it not.
	waitConnected(t, newURLStore(t, sentinelTLSURL(set, 2), m.files(set), redisstore.Options{}))
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
		var o redisstore.Options
		redisstore.PinClock(&o, clock.Now)
		s := newURLStore(t, sentinelTLSURL(set, 2), m.files(set), o)
		waitConnected(t, s)
		return s
	})
}

// dbLimit is a limit whose state is one hash field, named name.
func dbLimit(name string) bouncer.Limit {
	return bouncer.Limit{Name: name, Algorithm: bouncer.GCRA, Rate: 10, Burst: 10, Period: time.Hour}
}

func dbRequest(l bouncer.Limit, key string, cost int64) bouncer.Request {
	return bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: cost}
}

// A store on database 2 counts there, not in database 0: on a
// standalone server, and through Sentinel over TLS. Redis's functions
// are per server, so the library FUNCTION LOAD put there serves FCALL in
// database 2 too. Through Sentinel, the set with mutual TLS and the one
// that takes the CA alone. The keys are read back with redis-cli, which selects
// the database itself (-n).
func TestDatabaseNumber(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		addr := addrs(t, "BOUNCER_REDIS_ADDR")[0]
		s := newURLStore(t, "redis://"+addr+"/2", nil, redisstore.Options{})
		testCountsInDB(t, s, func(args ...string) (string, error) { return plainCLI(addr, args...) })
	})
	for _, m := range sentinelTLSModes {
		t.Run("sentinel-tls/"+m.name, func(t *testing.T) {
			set := sharedTLSSentinel(t, m)
			s := newURLStore(t, sentinelTLSURL(set, 2), m.files(set), redisstore.Options{})
			testCountsInDB(t, s, func(args ...string) (string, error) {
				master, err := set.Master()
				if err != nil {
					return "", err
				}
				return set.CLI(master, args...)
			})
		})
	}
}

// testCountsInDB checks twice on s (on database 2), and reads the state's
// key with cli in databases 2 and 0.
func testCountsInDB(t *testing.T, s *redisstore.Store, cli func(args ...string) (string, error)) {
	t.Helper()
	waitConnected(t, s)
	l := dbLimit("db")
	for _, want := range []int64{7, 4} {
		d, err := s.Check(t.Context(), dbRequest(l, "k", 3))
		if err != nil || d.Degraded || !d.Allowed || d.Remaining != want {
			t.Fatalf("check of 3: got %+v, %v; want allowed by Redis, %d remaining", d, err, want)
		}
	}
	rkey, _ := redisstore.StateOf(s, l, "k")
	for db, want := range map[string]string{"2": "1", "0": "0"} {
		if got, err := cli("-n", db, "exists", rkey); err != nil || got != want {
			t.Errorf("database %s: EXISTS %s: got %q, %v; want %s", db, rkey, got, err, want)
		}
	}
}

// plainCLI runs redis-cli against addr over plain TCP.
func plainCLI(addr string, args ...string) (string, error) {
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// A store on database 2 through Sentinel over TLS follows a failover
// (SENTINEL FAILOVER): it decides in Redis before, and again after,
// writing in database 2 of the new master, on connections that selected
// it (CLIENT LIST's db=2).
func TestSentinelTLSFailover(t *testing.T) {
	m := sentinelTLSModes[0]
	set := sharedTLSSentinel(t, m)
	co, err := redisstore.ParseURL(sentinelTLSURL(set, 2))
	if err != nil {
		t.Fatal(err)
	}
	co.ClientName = "bouncer-failover-" + freshPrefix()
	// A deadline of seconds, as newURLStore's: the checks asserted decided
	// in Redis must not miss the default 50 ms on a loaded machine (what
	// a failover does to checks under that deadline is TestSentinelFailover's).
	s, err := redisstore.New(redisstore.Options{Client: co, TLS: m.files(set), Prefix: freshPrefix(), Timeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	waitConnected(t, s)
	if d, err := s.Check(t.Context(), dbRequest(dbLimit("before"), "k", 1)); err != nil || d.Degraded {
		t.Fatalf("check before the failover: got %+v, %v; want decided in Redis", d, err)
	}
	old, err := set.Master()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := set.Failover(); err != nil {
		t.Fatal(err)
	}
	accepted := time.Now()
	master := followFailover(t, set, s, old)
	t.Logf("SENTINEL FAILOVER accepted after %v; a check decided in database 2 of the new master %s %v later",
		accepted.Sub(start).Round(time.Millisecond), master, time.Since(accepted).Round(time.Millisecond))
	list, err := set.CLI(master, "client", "list")
	if err != nil || !strings.Contains(list, " name="+co.ClientName+" ") {
		t.Fatalf("CLIENT LIST on the new master %s has no connection of the store: %v\n%s", master, err, list)
	}
	for line := range strings.Lines(list) {
		if strings.Contains(line, " name="+co.ClientName+" ") && !strings.Contains(line, " db=2 ") {
			t.Errorf("a connection of the store on the new master is not on database 2:\n%s", line)
		}
	}
}

// followFailover checks on s, a fresh limit each time, until a check is
// decided in Redis and its state is in database 2 of a master other than
// old, within 30 s; it returns that master. Every check returns without
// an error meanwhile.
func followFailover(t *testing.T, set *redistest.TLSSentinel, s *redisstore.Store, old string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		l := dbLimit(fmt.Sprintf("after-%d", i))
		d, err := s.Check(t.Context(), dbRequest(l, "k", 1))
		if err != nil {
			t.Fatalf("check %d after the failover: %v", i, err)
		}
		master, merr := set.Master()
		if !d.Degraded && merr == nil && master != old {
			rkey, _ := redisstore.StateOf(s, l, "k")
			if got, err := set.CLI(master, "-n", "2", "exists", rkey); err == nil && got == "1" {
				return master
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after SENTINEL FAILOVER, no check decided in database 2 of a new master (was %s, now %s %v): last %+v, health %+v",
				old, master, merr, d, s.Health())
		}
		<-tick.C
	}
}
