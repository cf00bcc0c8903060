package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// A hash's TTL covers the state of every field it holds, on Redis's own
// clock: after every check of a key made in a tight loop — a new bucket
// checked many times within its first second, the case where a run of
// skipped TTL extensions once left the TTL at the first write's and the
// state was forgotten at the next whole second — PEXPIRETIME is at or
// after the instant the stored state expires (Redis 7's PEXPIRETIME).
func TestTTLCoversState(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		ctx := context.Background()
		prefix := freshPrefix()
		s := newStore(t, c, redisstore.Options{Prefix: prefix})
		for _, a := range []bouncer.Algorithm{bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket} {
			l := bouncer.Limit{Name: "ttl", Algorithm: a, Rate: 20, Period: time.Second, Burst: 20}
			key := "ttl-" + a.String()
			hash, field := redisstore.StateOf(s, l, key)
			r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: 1}
			checked := 0
			for end := time.Now().Add(1100 * time.Millisecond); time.Now().Before(end); checked++ {
				if d, err := s.Check(ctx, r); err != nil || d.Degraded {
					t.Fatalf("%v: check: %+v, %v", a, d, err)
				}
				v, err := c.Do(ctx, c.B().Hget().Key(hash).Field(field).Build()).ToString()
				if err != nil {
					t.Fatalf("%v: HGET: %v", a, err)
				}
				expires := stateInstantMs(t, v)
				at, err := c.Do(ctx, c.B().Pexpiretime().Key(hash).Build()).AsInt64()
				if err != nil {
					t.Fatalf("%v: PEXPIRETIME: %v", a, err)
				}
				if at < expires {
					t.Fatalf("%v, check %d: the hash expires at %d ms, before its state does (%d ms): the state would be forgotten early", a, checked+1, at, expires)
				}
			}
			if checked < 40 {
				t.Fatalf("%v: only %d checks in 1.1 s: the test did not exercise the bucket's first second", a, checked)
			}
		}
	})
}

// stateInstantMs decodes a bucket's stored instant ("<s><9 digits of
// ns>") into Unix milliseconds, rounded up.
func stateInstantMs(t *testing.T, v string) int64 {
	t.Helper()
	if len(v) <= 9 {
		t.Fatalf("stored state %q: not an instant of this century", v)
	}
	sec, err1 := strconv.ParseInt(v[:len(v)-9], 10, 64)
	ns, err2 := strconv.ParseInt(v[len(v)-9:], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("stored state %q: %v %v", v, err1, err2)
	}
	return sec*1000 + (ns+999_999)/1_000_000
}
