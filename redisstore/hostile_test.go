package redisstore_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// maxKeyName bounds the length of every Redis key the store writes.
const maxKeyName = 128

// hostileEntity is a client-controlled key and limit name.
type hostileEntity struct{ key, name string }

func (e hostileEntity) String() string {
	q := func(s string) string {
		if len(s) > 40 {
			return fmt.Sprintf("%q…(%d bytes)", s[:20], len(s))
		}
		return fmt.Sprintf("%q", s)
	}
	return "key " + q(e.key) + " limit " + q(e.name)
}

// hostileEntities are keys and limit names that a store which put them in
// Redis key names, joined with separators or inside a hash tag, would mix
// up or let grow without bound.
func hostileEntities() []hostileEntity {
	long := strings.Repeat("k", 64<<10)
	return []hostileEntity{
		{"a", ""},
		{"a", "b"}, // "a" with limit "b" against …
		{"a:b", ""},
		{"a:", "b"},
		{"a", ":b"},
		{"", "a:b"},
		{"", ""},
		{"x", ""},
		{"{x}", ""},
		{"{x", ""},
		{"x}", ""},
		{"{", ""},
		{"}", ""},
		{"}{", ""},
		{"{}", ""},
		{"a{b}c", "{b}"},
		{"a\nb", ""},
		{"a\rb", ""},
		{"a\r\nb", ""},
		{"\n", "\n"},
		{"a\x00b", ""},
		{"a\x00", "b"},
		{"a", "\x00b"},
		{"\x00", ""},
		{"", "\x00"},
		{"%", ""},
		{"%s%d%n%%", "%"},
		{"*", "?"},
		{"[a-z]", ""},
		{"1:2,3:4", "%d+"}, // a log's stored form; a Lua pattern
		{"\xff\xfe", ""},
		{"0", ""},
		{"t1-1:0123456789ab:{0}", ""}, // the shape of a stored key
		{long, ""},
		{long + "x", ""},
		{long[1:] + "{", ""},
		{"a", long},
	}
}

// hostileLimit returns a limit of a's with capacity 100 that neither
// refills nor moves to another window within the test.
func hostileLimit(a bouncer.Algorithm, name string, window time.Duration) bouncer.Limit {
	l := bouncer.Limit{Name: name, Algorithm: a, Rate: 100, Period: window}
	switch {
	case a.UsesBurst():
		l.Rate, l.Period, l.Burst = 1, time.Hour, 100
	case a == bouncer.Concurrency:
		l.Period = time.Hour
	}
	return l
}

// TestHostileKeysIsolated charges every hostile key a different amount and
// checks that each key's remaining reflects its own charge only; then that
// every Redis key written is short and of the store's fixed layout.
func TestHostileKeysIsolated(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		window := quietWindow(t, c)
		for _, buckets := range []int{1, 0} {
			for _, a := range bouncer.Algorithms() {
				t.Run(fmt.Sprintf("buckets=%d/%s", buckets, a), func(t *testing.T) {
					prefix := freshPrefix()
					s := newStore(t, c, redisstore.Options{Prefix: prefix, Buckets: buckets})
					ents := hostileEntities()
					capacity := hostileLimit(a, "", window).Capacity()
					if int64(len(ents)) >= capacity {
						t.Fatal("test bug: more entities than units")
					}
					req := func(e hostileEntity, cost int64) bouncer.Request {
						return bouncer.Request{Cost: cost, Peek: cost == 0, Keys: []bouncer.KeyLimits{{Key: e.key, Limits: []bouncer.Limit{hostileLimit(a, e.name, window)}}}}
					}
					check := func(e hostileEntity, cost int64) bouncer.Decision {
						t.Helper()
						d, err := s.Check(context.Background(), req(e, cost))
						if err != nil || d.Degraded {
							t.Fatalf("%v: Check(cost %d) = %+v, %v", e, cost, d, err)
						}
						if d.Key != e.key || d.LimitName != e.name {
							t.Errorf("%v: decision names key %q limit %q", e, d.Key, d.LimitName)
						}
						return d
					}
					for _, e := range ents {
						if d := check(e, 0); d.Remaining != capacity {
							t.Fatalf("%v: fresh key has %d remaining; want %d", e, d.Remaining, capacity)
						}
					}
					// Entity i costs i+1: two entities sharing state would
					// show each other's charge.
					for i, e := range ents {
						if d := check(e, int64(i+1)); !d.Allowed || d.Remaining != capacity-int64(i+1) {
							t.Fatalf("%v: charging %d: allowed %v with %d remaining; want allowed with %d", e, i+1, d.Allowed, d.Remaining, capacity-int64(i+1))
						}
					}
					for i, e := range ents {
						if d := check(e, 0); d.Remaining != capacity-int64(i+1) {
							t.Errorf("%v, charged %d: %d remaining after every key was charged; want %d", e, i+1, d.Remaining, capacity-int64(i+1))
						}
					}

					keys := storedKeys(t, c, prefix)
					checkLayout(t, c, prefix, keys)
					// How many Redis keys: one hash per limit (limits differ
					// by name) with one bucket; at most one per key otherwise;
					// one string per key and limit for the log algorithms.
					names := map[string]bool{}
					for _, e := range ents {
						names[e.name] = true
					}
					want, exact := len(names), buckets == 1
					if a == bouncer.SlidingWindowLog || a == bouncer.Concurrency {
						want, exact = len(ents), true
					} else if !exact {
						want = len(ents)
					}
					if got := len(keys); got > want || exact && got != want {
						t.Errorf("%d Redis keys for %d keys under %d limit names; want %d (exact: %v)", got, len(ents), len(names), want, exact)
					}
				})
			}
		}
	})
}

// TestHostileKeyLengthCostsNothing: a 64 KiB key and limit name leave the
// same Redis keys, fields and values, byte for byte in size, as short ones.
func TestHostileKeyLengthCostsNothing(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		window := quietWindow(t, c)
		long := strings.Repeat("{:\n", 64<<10/3)
		footprint := func(key, name string) []string {
			prefix := freshPrefix()
			s := newStore(t, c, redisstore.Options{Prefix: prefix})
			var ls []bouncer.Limit
			for i, a := range bouncer.Algorithms() {
				ls = append(ls, hostileLimit(a, fmt.Sprintf("%s%d", name, i), window))
			}
			r := bouncer.Request{Cost: 3, Keys: []bouncer.KeyLimits{{Key: key, Limits: ls}}}
			if d, err := s.Check(context.Background(), r); err != nil || !d.Allowed || d.Degraded {
				t.Fatalf("Check(%d-byte key) = %+v, %v", len(key), d, err)
			}
			keys := storedKeys(t, c, prefix)
			checkLayout(t, c, prefix, keys)
			return footprintOf(t, c, prefix, keys)
		}
		short := footprint("k", "n")
		if len(short) != len(bouncer.Algorithms()) {
			t.Errorf("one key under %d limits left %d Redis keys: %q", len(bouncer.Algorithms()), len(short), short)
		}
		if got := footprint(long, long); !slices.Equal(got, short) {
			t.Errorf("a %d-byte key and limit name left\n\t%q\nin Redis; a 1-byte key and 2-byte name left\n\t%q", len(long), got, short)
		}
	})
}

// storedKeys lists the Redis keys that start with prefix: on a Cluster,
// those of every master.
func storedKeys(t *testing.T, c rueidis.Client, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	nodes := map[string]rueidis.Client{"": c}
	if c.Mode() == rueidis.ClientModeCluster {
		nodes = map[string]rueidis.Client{}
		for addr, n := range c.Nodes() {
			role, err := n.Do(ctx, n.B().Role().Build()).ToArray()
			if err != nil || len(role) == 0 {
				t.Fatalf("ROLE on %s: %v", addr, err)
			}
			if r, _ := role[0].ToString(); r == "master" {
				nodes[addr] = n
			}
		}
		if len(nodes) < 2 {
			t.Fatalf("%d Cluster masters found; want several", len(nodes))
		}
	}
	seen := map[string]bool{}
	for addr, n := range nodes {
		var cursor uint64
		for {
			e, err := n.Do(ctx, n.B().Scan().Cursor(cursor).Match(prefix+":*").Count(10000).Build()).AsScanEntry()
			if err != nil {
				t.Fatalf("SCAN on %q: %v", addr, err)
			}
			for _, k := range e.Elements {
				seen[k] = true
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		t.Fatalf("no Redis key starts with %q", prefix+":")
	}
	return keys
}

var (
	// keyLayout is every Redis key name the store may write, after the
	// prefix: a 12-hex-digit limit id, a group's tag in braces, a bucket
	// number and, for a log, the key's 8-byte digest in hex.
	keyLayout = regexp.MustCompile(`^:[0-9a-f]{12}:\{[0-9]{1,6}\}(0|[1-9][0-9]{0,19})(:[0-9a-f]{16})?$`)
	// hashValue is a one-word state: an instant, and a count for the
	// sliding window counter.
	hashValue = regexp.MustCompile(`^[0-9]{1,20}(:[0-9]{1,20})?$`)
	// logMember is an entry of a log's sorted set: a 20-digit instant and
	// a count; or "#", whose score keeps the total.
	logMember = regexp.MustCompile(`^([0-9]{20}:[0-9]{1,20}|#)$`)
)

// checkLayout asserts that every key is short and of the fixed layout,
// that hash fields are 8-byte digests and values are numbers only, so
// that no byte of a client's key or limit name reached Redis, and that
// every key expires.
func checkLayout(t *testing.T, c rueidis.Client, prefix string, keys []string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keys {
		if len(k) > maxKeyName || strings.ContainsAny(k, "\n\r\x00") {
			t.Errorf("Redis key %q: %d bytes; want at most %d, without newlines or NULs", k, len(k), maxKeyName)
			continue
		}
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok || !keyLayout.MatchString(rest) {
			t.Errorf("Redis key %q: want %q followed by %v", k, prefix, keyLayout)
			continue
		}
		if ttl, err := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64(); err != nil || ttl <= 0 {
			t.Errorf("Redis key %q: PTTL %d, %v; want a TTL", k, ttl, err)
		}
		log := strings.Count(rest, ":") == 3
		if log {
			ms, err := c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Build()).AsStrSlice()
			if err != nil || len(ms) < 2 {
				t.Errorf("Redis key %q: ZRANGE = %q, %v; want a log's entries and its total", k, ms, err)
			}
			for _, m := range ms {
				if !logMember.MatchString(m) {
					t.Errorf("Redis key %q: member %q; want %v", k, m, logMember)
				}
			}
			continue
		}
		m, err := c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
		if err != nil || len(m) == 0 {
			t.Errorf("Redis key %q: HGETALL = %v, %v; want a non-empty hash", k, m, err)
		}
		for f, v := range m {
			if len(f) != 8 || !hashValue.MatchString(v) {
				t.Errorf("Redis hash %q: field %q = %q; want an 8-byte digest and %v", k, f, v, hashValue)
			}
		}
	}
}

// footprintOf describes keys without what differs between two keys of the
// same limits: the prefix, the limit ids, bucket numbers and digests; with
// each value's size.
func footprintOf(t *testing.T, c rueidis.Client, prefix string, keys []string) []string {
	t.Helper()
	ctx := context.Background()
	bucket := regexp.MustCompile(`\{[0-9]+\}[0-9]+`)
	hex := regexp.MustCompile(`[0-9a-f]{12,16}`)
	var out []string
	for _, k := range keys {
		shape := bucket.ReplaceAllString(strings.TrimPrefix(k, prefix), "{bucket}")
		shape = hex.ReplaceAllStringFunc(shape, func(s string) string {
			return fmt.Sprintf("<%d hex>", len(s))
		})
		if strings.Count(shape, ":") == 3 {
			ms, err := c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Build()).AsStrSlice()
			if err != nil {
				t.Fatalf("ZRANGE %q: %v", k, err)
			}
			var sizes []int
			for _, m := range ms {
				sizes = append(sizes, len(m))
			}
			out = append(out, fmt.Sprintf("%s zset %v", shape, sizes))
			continue
		}
		m, err := c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
		if err != nil {
			t.Fatalf("HGETALL %q: %v", k, err)
		}
		var fields []string
		for f, v := range m {
			fields = append(fields, fmt.Sprintf("%d=%d", len(f), len(v)))
		}
		slices.Sort(fields)
		out = append(out, fmt.Sprintf("%s hash %v", shape, fields))
	}
	slices.Sort(out)
	return out
}
