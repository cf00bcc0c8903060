package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/redistest"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// The Redis benchmarks run against the servers scripts/redis-up.sh starts:
// BOUNCER_REDIS_ADDR is the standalone server, BOUNCER_REDIS_CLUSTER_ADDRS
// the Cluster's nodes (source .redis/env). Without them they skip, unless
// BOUNCER_REQUIRE_REDIS is set, when they fail. They share those servers
// with others: every key they write is under a prefix of this run's own,
// expires within the hour, and is deleted (SCAN and UNLINK of that prefix)
// when its benchmark ends; they never flush a shared server.

// redisTopology is one Redis deployment.
type redisTopology struct {
	name    string
	cluster bool
}

var redisTopologies = []redisTopology{
	{"standalone", false},
	{"cluster", true},
}

// redisAddrs returns the addresses of tp's servers (internal/redistest:
// it skips tb, or fails it under BOUNCER_REQUIRE_REDIS, when they are not
// set).
func redisAddrs(tb testing.TB, tp redisTopology) []string {
	tb.Helper()
	if tp.cluster {
		return redistest.ClusterAddrs(tb)
	}
	return []string{redistest.Addr(tb)}
}

// runID keeps this process's Redis keys apart from every other run's.
var runID = "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(os.Getpid())

// redisConn is one deployment: go-redis v9 connected for the peers, with
// its library's default settings, and the addresses Bouncer's store
// connects to itself (with redisstore.ClientOption, as users do).
type redisConn struct {
	goredis redis.UniversalClient
	addrs   []string
}

func dialRedis(tb testing.TB, addrs []string, cluster bool) *redisConn {
	tb.Helper()
	c := &redisConn{addrs: addrs}
	if cluster {
		c.goredis = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	} else {
		c.goredis = redis.NewClient(&redis.Options{Addr: addrs[0]})
	}
	if err := c.goredis.Ping(context.Background()).Err(); err != nil {
		c.close()
		tb.Fatalf("connecting to %v: %v", addrs, err)
	}
	return c
}

func (c *redisConn) close() {
	c.goredis.Close()
}

// The Redis benchmarks' limits, in every implementation's terms (see
// spec). Bouncer's store and redis_rate admit Burst at once, throttled is
// given MaxBurst Burst-1 to match; ulule counts WindowRate per Window.
var (
	// redisCheckSpec admits every check of BenchmarkRedisCheck: buckets
	// refill one unit per second with room for a million, windows admit a
	// million an hour. Warming charges redisWarmCost, an hour's refill, so
	// that every key's state outlives the run but none outlives the hour.
	redisCheckSpec = spec{Rate: 1, Period: time.Second, Burst: 1_000_000, WindowRate: 1_000_000, Window: time.Hour}

	// redisRefillSpec is BenchmarkRedisCheck's with state=refilled: a
	// thousand a second with room for eight, so that a key's state has
	// refilled by the time a caller comes back to it (the next caller
	// comes tens of milliseconds later, the same caller after all the
	// other keys), and checks of one key by callers that walk side by
	// side are still allowed.
	redisRefillSpec = spec{Rate: 1, Period: time.Millisecond, Burst: 8, WindowRate: 1000, Window: time.Second}

	// redisHoldSpec is BenchmarkRedisBytesPerKey's 1-hour limit: 1000 an
	// hour, one unit refilled an hour, so that one check's state lives an
	// hour.
	redisHoldSpec = spec{Rate: 1, Period: time.Hour, Burst: 1000, WindowRate: 1000, Window: time.Hour}

	// redisSmallSpec admits three checks per key, for
	// TestRedisImplementations.
	redisSmallSpec = spec{Rate: 1, Period: time.Hour, Burst: 3, WindowRate: 3, Window: time.Hour}
)

// redisWarmCost is what warming charges each key of BenchmarkRedisCheck.
const redisWarmCost = 3600

// redisLimiter is one implementation on one Redis deployment. It is safe
// for concurrent use.
type redisLimiter interface {
	// check charges cost units to key and reports whether it was allowed.
	// An answer that did not come from Redis is an error.
	check(ctx context.Context, key string, cost int64) (bool, error)
	// held reports whether Redis holds state for key.
	held(ctx context.Context, key string) (bool, error)
	// close releases what the implementation holds besides the
	// connection.
	close()
}

// redisImpl is one implementation under test. new returns it on c for
// keys that start with keyPrefix (every key it is given does), with the
// SCAN pattern that matches every Redis key it writes for them; buckets
// is the Buckets of Bouncer's store, 0 for its default.
type redisImpl struct {
	name string
	new  func(c *redisConn, keyPrefix string, sp spec, buckets int) (l redisLimiter, pattern string, err error)
}

// redisImpls are the implementations of the Redis benchmarks. The peers
// keep a key's state under "rate:" followed by the key, the prefix
// redis_rate hardwires, so that every peer's Redis key names are the same
// bytes; Bouncer's store keeps keys' digests in hashes under its prefix.
var redisImpls = []redisImpl{
	{"bouncer-redisstore-gcra", newRedisBouncer},
	{"redis_rate", newRedisRate},
	{"ulule-redis", newUluleRedis},
	{"throttled-goredisstore", newThrottledRedis},
}

// peerPrefix starts every peer's Redis key; see redisImpls.
const peerPrefix = "rate:"

// redisBouncer is Bouncer's Redis store with one GCRA limit per key,
// building a Request per check as a server does.
type redisBouncer struct {
	s      *redisstore.Store
	limits []bouncer.Limit
}

func newRedisBouncer(c *redisConn, keyPrefix string, sp spec, buckets int) (redisLimiter, string, error) {
	// The store's keys hold digests, not keys: the run's prefix goes into
	// the store's own.
	prefix := "bouncer"
	if keyPrefix != "" {
		prefix += "-" + strings.NewReplacer(":", "-").Replace(strings.TrimSuffix(keyPrefix, ":"))
	}
	// The store's defaults (deadline, failure policy), as users get it,
	// but under -short (smokeTimeout).
	s, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption(c.addrs), Prefix: prefix, Buckets: buckets, Timeout: smokeTimeout()})
	if err != nil {
		return nil, "", err
	}
	l := bouncer.Limit{Name: "bench", Algorithm: bouncer.GCRA, Rate: sp.Rate, Period: sp.Period, Burst: sp.Burst}
	return &redisBouncer{s: s, limits: []bouncer.Limit{l}}, prefix + ":*", nil
}

var errDegraded = errors.New("bench: decision degraded: Redis did not answer")

// smokeTimeout is the deadline of Bouncer's Redis stores: the store's
// default (0), except under -short. make test's bench-check runs every
// benchmark once under -short, to see that it works, beside the rest of
// the suite: a machine that busy holds a call past the default 50 ms now
// and then, and the decision, by policy, would fail the run, which counts
// none. Measured runs never use -short.
func smokeTimeout() time.Duration {
	if testing.Short() {
		return 10 * time.Second
	}
	return 0
}

func (b *redisBouncer) decide(ctx context.Context, key string, cost int64) (bouncer.Decision, error) {
	d, err := b.s.Check(ctx, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: b.limits}}, Cost: cost, Peek: cost == 0})
	if err == nil && d.Degraded {
		err = errDegraded
	}
	return d, err
}

func (b *redisBouncer) check(ctx context.Context, key string, cost int64) (bool, error) {
	d, err := b.decide(ctx, key, cost)
	return d.Allowed, err
}

func (b *redisBouncer) held(ctx context.Context, key string) (bool, error) {
	d, err := b.decide(ctx, key, 0)
	return d.Remaining < d.Capacity, err
}

func (b *redisBouncer) close() { b.s.Close() }

// redisRate is go-redis/redis_rate: GCRA in a Lua script, one string per
// key under "rate:".
type redisRate struct {
	l     *redis_rate.Limiter
	limit redis_rate.Limit
}

func newRedisRate(c *redisConn, keyPrefix string, sp spec, _ int) (redisLimiter, string, error) {
	l := redis_rate.Limit{Rate: int(sp.Rate), Period: sp.Period, Burst: int(sp.Burst)}
	return redisRate{redis_rate.NewLimiter(c.goredis), l}, peerPrefix + keyPrefix + "*", nil
}

func (r redisRate) check(ctx context.Context, key string, cost int64) (bool, error) {
	res, err := r.l.AllowN(ctx, key, r.limit, int(cost))
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

// held peeks with cost 0, which writes nothing for a key it has no state
// for.
func (r redisRate) held(ctx context.Context, key string) (bool, error) {
	res, err := r.l.AllowN(ctx, key, r.limit, 0)
	if err != nil {
		return false, err
	}
	return res.Remaining < r.limit.Burst, nil
}

func (redisRate) close() {}

// ululeRedis is ulule/limiter's Redis store: a fixed window, INCRBY and
// PEXPIRE in a Lua script, one string per key.
type ululeRedis struct{ l *ulule.Limiter }

func newUluleRedis(c *redisConn, keyPrefix string, sp spec, _ int) (redisLimiter, string, error) {
	// The store writes Prefix + ":" + key.
	st, err := ululeredis.NewStoreWithOptions(c.goredis, ulule.StoreOptions{Prefix: strings.TrimSuffix(peerPrefix, ":")})
	if err != nil {
		return nil, "", err
	}
	return ululeRedis{ulule.New(st, ulule.Rate{Period: sp.Window, Limit: sp.WindowRate})}, peerPrefix + keyPrefix + "*", nil
}

func (u ululeRedis) check(ctx context.Context, key string, cost int64) (bool, error) {
	c, err := u.l.Increment(ctx, key, cost)
	return err == nil && !c.Reached, err
}

func (u ululeRedis) held(ctx context.Context, key string) (bool, error) {
	c, err := u.l.Peek(ctx, key)
	return c.Remaining < c.Limit, err
}

func (ululeRedis) close() {}

// throttledRedis is throttled's GCRA over its go-redis v9 store: a check
// reads the key and Redis's TIME in a pipeline, then writes with SETNX and
// EXPIRE (a new key) or a compare-and-swap script (a known one).
type throttledRedis struct {
	st *goredisstore.GoRedisStore
	rl *throttled.GCRARateLimiterCtx
}

func newThrottledRedis(c *redisConn, keyPrefix string, sp spec, _ int) (redisLimiter, string, error) {
	st, err := goredisstore.NewCtx(c.goredis, peerPrefix)
	if err != nil {
		return nil, "", err
	}
	// It admits MaxBurst+1 at once.
	quota := throttled.RateQuota{MaxRate: throttled.PerDuration(int(sp.Rate), sp.Period), MaxBurst: int(sp.Burst - 1)}
	rl, err := throttled.NewGCRARateLimiterCtx(st, quota)
	if err != nil {
		return nil, "", err
	}
	// As in BenchmarkCheck: a check that loses a compare-and-swap race
	// retries, up to this bound, then fails.
	rl.SetMaxCASAttemptsLimit(1000)
	return throttledRedis{st, rl}, peerPrefix + keyPrefix + "*", nil
}

func (t throttledRedis) check(ctx context.Context, key string, cost int64) (bool, error) {
	limited, _, err := t.rl.RateLimitCtx(ctx, key, int(cost))
	return err == nil && !limited, err
}

// held reads the store directly: a check of quantity 0 would write a key
// it has no state for.
func (t throttledRedis) held(ctx context.Context, key string) (bool, error) {
	v, _, err := t.st.GetWithTime(ctx, key)
	return v != -1, err
}

func (throttledRedis) close() {}

// deleteKeys unlinks every key matching pattern on every master c reaches.
func deleteKeys(ctx context.Context, c redis.UniversalClient, pattern string) error {
	del := func(ctx context.Context, n *redis.Client) error {
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			// One key per UNLINK: a Cluster node refuses keys of
			// several slots in one command.
			_, err := n.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range batch {
					p.Unlink(ctx, k)
				}
				return nil
			})
			batch = batch[:0]
			return err
		}
		it := n.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			if batch = append(batch, it.Val()); len(batch) == 1000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
		return flush()
	}
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, del)
	case *redis.Client:
		return del(ctx, c)
	}
	return fmt.Errorf("bench: unknown go-redis client %T", c)
}

// TestRedisImplementations checks that every Redis implementation is
// configured as intended, on both deployments: redisSmallSpec admits three
// checks per key and denies the fourth, and the implementation holds
// state for exactly the keys it checked.
func TestRedisImplementations(t *testing.T) {
	for _, tp := range redisTopologies {
		t.Run("topology="+tp.name, func(t *testing.T) {
			c := dialRedis(t, redisAddrs(t, tp), tp.cluster)
			defer c.close()
			ctx := context.Background()
			for i, im := range redisImpls {
				t.Run("impl="+im.name, func(t *testing.T) {
					kp := fmt.Sprintf("%s-test%d:", runID, i)
					l, pattern, err := im.new(c, kp, redisSmallSpec, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer l.close()
					defer func() {
						if err := deleteKeys(ctx, c.goredis, pattern); err != nil {
							t.Errorf("deleting %s: %v", pattern, err)
						}
					}()
					for i, want := range []bool{true, true, true, false} {
						got, err := l.check(ctx, kp+"user:1", 1)
						if err != nil || got != want {
							t.Fatalf("check %d: got %v, %v, want %v, <nil>", i+1, got, err, want)
						}
					}
					if ok, err := l.check(ctx, kp+"user:2", 1); !ok || err != nil {
						t.Fatalf("check of user:2: got %v, %v, want true, <nil>", ok, err)
					}
					for _, key := range []string{"user:1", "user:2", "user:3"} {
						got, err := l.held(ctx, kp+key)
						if want := key != "user:3"; err != nil || got != want {
							t.Errorf("held(%q): got %v, %v, want %v, <nil>", key, got, err, want)
						}
					}
				})
			}
		})
	}
}
