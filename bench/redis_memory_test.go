package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisBytesKeys is how many distinct keys BenchmarkRedisBytesPerKey
// writes, and redisSmokeKeys how many it writes in a smoke run
// (-benchtime 1x, as CI runs it), which checks that it works rather than
// measures.
const (
	redisBytesKeys = 200_000
	redisSmokeKeys = 10_000
)

// redisBytesKeyCount returns redisSmokeKeys under -benchtime 1x, else
// redisBytesKeys.
func redisBytesKeyCount() int {
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1x" {
		return redisSmokeKeys
	}
	return redisBytesKeys
}

// bucketsFor returns the Buckets redisstore's docs advise for n keys: n
// over 64 per hash, rounded up to a power of two (4096 for 200 000).
func bucketsFor(n int) int {
	b := 1
	for b*64 < n {
		b <<= 1
	}
	return b
}

// BenchmarkRedisBytesPerKey measures the Redis memory an implementation
// takes per key: INFO memory's used_memory (summed over the masters on a
// Cluster) after 200 000 distinct keys were checked once each under a
// 1-hour limit (1000 an hour; one check's state lives an hour), less
// used_memory before, over 200 000, reported as B/key.
//
// So that nothing else is counted, it runs on Redis servers of its own,
// which it starts with the redis-server found on PATH on free loopback
// ports and stops at the end: one standalone server, and a Cluster of
// three masters without replicas. It runs only when the shared test
// servers' addresses are set (see redisAddrs), so that one switch turns
// every Redis benchmark on. Before each measurement it empties them
// (FLUSHALL), runs a check so that the implementation's scripts are in
// Redis's script cache on both sides of the measurement, empties them
// again, and measures with every client but its own one connection per
// server closed; the same holds after the insertion, so client buffers
// are never counted.
//
// Keys are "user:N", made afresh for each check; the peers keep each
// under "rate:user:N", and Bouncer's store (GCRA) keeps 8-byte digests in
// hashes. Its Buckets is set as its docs advise: the keys over 64,
// rounded up to a power of two, 4096 for 200 000 keys (each hash then
// holds about 49 keys and stays in the compact listpack encoding).
//
// The insertion runs from 64 goroutines and is timed, reported per key as
// ns/key. The benchmark fails unless every check was allowed, Redis holds
// exactly as many keys' worth of state as it wrote (Redis keys, counting
// each hash as its fields), and a sample of 1000 keys shows state; it
// reports how many Redis keys that took as redis-keys.
//
// Under -benchtime 1x, a smoke run as in CI, it writes 10 000 keys
// (Buckets 256) instead of 200 000, so that the run stays quick; the
// keys= part of its name says which.
func BenchmarkRedisBytesPerKey(b *testing.B) {
	for _, tp := range redisTopologies {
		b.Run("topology="+tp.name, func(b *testing.B) {
			redisAddrs(b, tp)
			srv := startPrivateRedis(b, tp.cluster)
			n := redisBytesKeyCount()
			srv.buckets = bucketsFor(n)
			for _, im := range redisImpls {
				b.Run("impl="+im.name+"/keys="+strconv.Itoa(n), func(b *testing.B) {
					var perKey, redisKeys float64
					runs := 0
					for b.Loop() {
						b.StopTimer()
						before := srv.prepare(b, im)
						c := srv.dial(b)
						l, _, err := im.new(c, "", redisHoldSpec, srv.buckets)
						if err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						failed, err := redisInsert(l, n)
						b.StopTimer()
						l.close()
						c.close()
						if failed > 0 {
							b.Fatalf("%d of %d first checks denied or failed (%v)", failed, n, err)
						}
						after := srv.usedMemory(b)
						keys, entries := srv.count(b)
						if entries != int64(n) {
							b.Fatalf("Redis holds %d keys' worth of state in %d Redis keys, want %d", entries, keys, n)
						}
						srv.sample(b, im, n)
						perKey += float64(after-before) / float64(n)
						redisKeys += float64(keys)
						runs++
						b.StartTimer()
					}
					b.ReportMetric(perKey/float64(runs), "B/key")
					b.ReportMetric(redisKeys/float64(runs), "redis-keys")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(runs)/float64(n), "ns/key")
				})
			}
		})
	}
}

// redisInsert checks keys user:0 to user:n-1 once each from 64
// goroutines and returns how many checks were denied or failed, with the
// first error.
func redisInsert(l redisLimiter, n int) (int, error) {
	const writers = 64
	var mu sync.Mutex
	failed := 0
	var first error
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			ctx := context.Background()
			var buf [32]byte
			f := 0
			var ferr error
			for i := g; i < n; i += writers {
				key := string(strconv.AppendInt(append(buf[:0], "user:"...), int64(i), 10))
				ok, err := l.check(ctx, key, 1)
				if err == nil && !ok {
					err = errDenied
				}
				if err != nil {
					if f++; ferr == nil {
						ferr = err
					}
				}
			}
			mu.Lock()
			failed += f
			if first == nil {
				first = ferr
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return failed, first
}

// privateRedis is a Redis deployment of the benchmark's own: a
// standalone server, or a Cluster of three masters.
type privateRedis struct {
	cluster bool
	addrs   []string
	// admin holds one connection to each server (each master), for
	// FLUSHALL, INFO and counting.
	admin []*redis.Client
	// buckets is the Buckets of Bouncer's store.
	buckets int
}

// startPrivateRedis starts a deployment, stopped when b ends. Without
// redis-server on PATH it skips b, or fails it under
// BOUNCER_REQUIRE_REDIS.
func startPrivateRedis(b *testing.B, cluster bool) *privateRedis {
	b.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("BOUNCER_REQUIRE_REDIS") != "" {
			b.Fatalf("redis-server not found on PATH: %v", err)
		}
		b.Skipf("redis-server not found on PATH, so the Redis memory benchmark skips: %v", err)
	}
	n := 1
	if cluster {
		n = 3
	}
	s := &privateRedis{cluster: cluster}
	var used []int
	for range n {
		port := startRedisServer(b, bin, cluster, used)
		used = append(used, port, port+10000)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		s.addrs = append(s.addrs, addr)
		// No pipeline pool: one connection, counted as such.
		a := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, PipelinePoolSize: -1})
		b.Cleanup(func() { a.Close() })
		s.admin = append(s.admin, a)
	}
	if cluster {
		s.formCluster(b)
	}
	return s
}

// startRedisServer starts one redis-server on a free loopback port (and,
// for a Cluster node, with its bus port, port+10000, free too) and returns
// the port once it answers.
func startRedisServer(b *testing.B, bin string, cluster bool, taken []int) int {
	b.Helper()
	dir := b.TempDir()
	var lastErr error
	for range 5 {
		port, err := freePort(cluster, taken)
		if err != nil {
			b.Fatal(err)
		}
		args := []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--daemonize", "no", "--save", "", "--appendonly", "no",
		}
		if cluster {
			args = append(args, "--cluster-enabled", "yes",
				"--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf",
				"--cluster-node-timeout", "5000")
		}
		cmd := exec.Command(bin, args...)
		setDeathSignal(cmd)
		if err := cmd.Start(); err != nil {
			b.Fatalf("starting redis-server: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if lastErr = waitRedis(port, exited); lastErr == nil {
			b.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			return port
		}
		cmd.Process.Kill()
		<-exited
	}
	b.Fatalf("redis-server did not start: %v", lastErr)
	return 0
}

// waitRedis waits until the server on port answers PING, or exits.
func waitRedis(port int, exited <-chan error) error {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), PoolSize: 1, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server on port %d exited: %v", port, err)
		default:
		}
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a loopback port nothing listens on, not in taken, whose
// bus port (port+10000) is free too if cluster is set.
func freePort(cluster bool, taken []int) (int, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if cluster {
			if port+10000 > 65535 || containsInt(taken, port) || containsInt(taken, port+10000) {
				continue
			}
			bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
			if err != nil {
				continue
			}
			bus.Close()
		}
		return port, nil
	}
	return 0, errors.New("no free port pair found")
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// formCluster gives each master a third of the slots, as redis-cli
// --cluster create does, introduces them to each other and waits until
// every one of them sees the whole Cluster.
func (s *privateRedis) formCluster(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	const slots = 16384
	for i, a := range s.admin {
		lo, hi := i*slots/len(s.admin), (i+1)*slots/len(s.admin)-1
		if err := a.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			b.Fatalf("CLUSTER SET-CONFIG-EPOCH on %s: %v", s.addrs[i], err)
		}
		if err := a.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			b.Fatalf("CLUSTER ADDSLOTS on %s: %v", s.addrs[i], err)
		}
	}
	for _, addr := range s.addrs[1:] {
		host, port, _ := net.SplitHostPort(addr)
		if err := s.admin[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			b.Fatalf("CLUSTER MEET %s: %v", addr, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for i, a := range s.admin {
		for {
			info, err := a.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(s.admin))+"\r") &&
				strings.Contains(info, "cluster_slots_ok:16384") {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("private Cluster node %s not ready: %v\n%s", s.addrs[i], err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (s *privateRedis) dial(b *testing.B) *redisConn { return dialRedis(b, s.addrs, s.cluster) }

// prepare empties the deployment, loads im's scripts with a few checks,
// empties it again and returns its used_memory.
func (s *privateRedis) prepare(b *testing.B, im redisImpl) int64 {
	b.Helper()
	s.flush(b)
	c := s.dial(b)
	l, _, err := im.new(c, "", redisHoldSpec, s.buckets)
	if err != nil {
		c.close()
		b.Fatal(err)
	}
	ctx := context.Background()
	// 64 keys, so that every master of a Cluster runs the scripts; the
	// second check of each takes the path of a key that exists
	// (throttled's compare-and-swap script).
	for i := range 64 {
		key := "probe:" + strconv.Itoa(i)
		for range 2 {
			if ok, err := l.check(ctx, key, 1); !ok || err != nil {
				c.close()
				b.Fatalf("probe check: %v, %v", ok, err)
			}
		}
		if _, err := l.held(ctx, key); err != nil {
			c.close()
			b.Fatalf("probe held: %v", err)
		}
	}
	l.close()
	c.close()
	s.flush(b)
	return s.usedMemory(b)
}

func (s *privateRedis) flush(b *testing.B) {
	b.Helper()
	for i, a := range s.admin {
		// Synchronous: the memory is free when it returns (unless
		// lazyfree-lazy-user-flush is set, which it is not here).
		if err := a.FlushAll(context.Background()).Err(); err != nil {
			b.Fatalf("FLUSHALL on %s: %v", s.addrs[i], err)
		}
	}
}

// usedMemory returns used_memory summed over the servers, once no client
// but the admin connections is left and it has settled.
func (s *privateRedis) usedMemory(b *testing.B) int64 {
	b.Helper()
	ctx := context.Background()
	var total int64
	for i, a := range s.admin {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := infoField(ctx, a, "clients", "connected_clients")
			if err != nil {
				b.Fatalf("INFO clients on %s: %v", s.addrs[i], err)
			}
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				list, _ := a.ClientList(ctx).Result()
				b.Fatalf("%s still has %d clients connected:\n%s", s.addrs[i], n, list)
			}
			time.Sleep(10 * time.Millisecond)
		}
		total += settled(b, a, s.addrs[i])
	}
	return total
}

// settled returns the used_memory of the server a is connected to once it
// has settled: two readings 200ms apart within 16 KiB of each other (the
// admin connection's own buffers vary by about that much), so that a
// dict that grew near the end of an insertion has finished rehashing
// into its new table and freed the old one.
func settled(b *testing.B, a *redis.Client, addr string) int64 {
	b.Helper()
	ctx := context.Background()
	prev := int64(-1 << 62)
	for range 25 {
		m, err := infoField(ctx, a, "memory", "used_memory")
		if err != nil {
			b.Fatalf("INFO memory on %s: %v", addr, err)
		}
		if d := m - prev; d > -16<<10 && d < 16<<10 {
			return m
		}
		prev = m
		time.Sleep(200 * time.Millisecond)
	}
	b.Fatalf("used_memory on %s did not settle in 5s", addr)
	return 0
}

// infoField returns the integer field of INFO section.
func infoField(ctx context.Context, c *redis.Client, section, field string) (int64, error) {
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in INFO %s", field, section)
}

// count returns how many Redis keys the servers hold and how many keys'
// worth of state: every Redis key that is not a hash counts one, every
// hash as many as its fields.
func (s *privateRedis) count(b *testing.B) (keys, entries int64) {
	b.Helper()
	ctx := context.Background()
	for i, a := range s.admin {
		n, err := a.DBSize(ctx).Result()
		if err != nil {
			b.Fatalf("DBSIZE on %s: %v", s.addrs[i], err)
		}
		var hashes []string
		it := a.ScanType(ctx, 0, "*", 1000, "hash").Iterator()
		for it.Next(ctx) {
			hashes = append(hashes, it.Val())
		}
		if err := it.Err(); err != nil {
			b.Fatalf("SCAN on %s: %v", s.addrs[i], err)
		}
		cmds, err := a.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, h := range hashes {
				p.HLen(ctx, h)
			}
			return nil
		})
		if err != nil {
			b.Fatalf("HLEN on %s: %v", s.addrs[i], err)
		}
		keys += n
		entries += n - int64(len(hashes))
		for _, c := range cmds {
			entries += c.(*redis.IntCmd).Val()
		}
	}
	return keys, entries
}

// sample fails b unless im shows state for 1000 of the n keys.
func (s *privateRedis) sample(b *testing.B, im redisImpl, n int) {
	b.Helper()
	c := s.dial(b)
	defer c.close()
	l, _, err := im.new(c, "", redisHoldSpec, s.buckets)
	if err != nil {
		b.Fatal(err)
	}
	defer l.close()
	for i := 0; i < n; i += n / 1000 {
		key := "user:" + strconv.Itoa(i)
		if ok, err := l.held(context.Background(), key); !ok || err != nil {
			b.Fatalf("held(%q): %v, %v, want true, <nil>", key, ok, err)
		}
	}
}
