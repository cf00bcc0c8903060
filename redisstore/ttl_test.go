package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"pgregory.net/rapid"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

// The TTL invariant: a hash's TTL covers the state of every field it
// holds. coverLua checks it for KEYS[1], a hash of the limit ARGV[2]'s
// states, at the call's clock: it returns one line per field whose state
// expires after the hash does (or a hash with fields and no TTL). A field
// more than algo.Far ticks ahead is read as fresh, and needs no TTL.
const coverLua = `
local function cover(p, key)
	local bad = {}
	local at = redis.call('PEXPIRETIME', key)
	local all = redis.call('HGETALL', key)
	for j = 1, #all, 2 do
		local st = A[p.alg].decode(p, all[j + 1])
		local e = nil
		if st ~= nil then
			e = A[p.alg].expiry(p, st)
		end
		if e ~= nil and e > 0 then
			local ems = T.ms(p, e + p.ms - 1) -- rounded up
			if at < 0 or ems > at then
				bad[#bad + 1] = string.format('field %q (%s) expires at %d ms, the hash at %d', all[j], all[j + 1], ems, at)
			end
		end
	end
	return bad
end
`

var coverScript = redisstore.ComposeLua(coverLua + `return cover(A.params(ARGV[2]), KEYS[1])`)

// oneWord are the algorithms whose state is a hash's field.
var oneWord = []bouncer.Algorithm{bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket, bouncer.FixedWindow, bouncer.SlidingWindowCounter}

// On Redis's own clock, through the store: keys sharing one hash (one
// bucket) are checked at random, as fast as the loop goes, under limits of
// every one-word algorithm — a new bucket checked many times within its
// first second is where a run of skipped TTL extensions once left the TTL
// at the first write's, and the state was forgotten at the next whole
// second — and after every check every field's state expires no later
// than the hash (Redis 7's PEXPIRETIME). The loop runs 0.4 s, and on a
// loaded machine on until 40 checks, within the hash's first second; one
// that falls short even so checks a fresh hash (of a fresh store) again,
// up to ttlAttempts times.
func TestTTLCoversState(t *testing.T) {
	const ttlAttempts = 5
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(1, 2))
		for _, a := range oneWord {
			for _, l := range []bouncer.Limit{
				{Name: "ttl-second", Algorithm: a, Rate: 20, Period: time.Second, Burst: 20},
				{Name: "ttl-minute", Algorithm: a, Rate: 50, Period: time.Minute, Burst: 5},
			} {
				if !bucket(a) {
					l.Burst = 0
				}
				for attempt := 1; ; attempt++ {
					s := newStore(t, c, redisstore.Options{Buckets: 1})
					hash, _ := redisstore.StateOf(s, l, "k0")
					checked := 0
					for start := time.Now(); time.Since(start) < 400*time.Millisecond || checked < 40 && time.Since(start) < time.Second; checked++ {
						key := "k" + strconv.Itoa(rng.IntN(4))
						r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: 1 + rng.Int64N(3)}
						if d, err := s.Check(ctx, r); err != nil || d.Degraded {
							t.Fatalf("%v %s: check: %+v, %v", a, l.Name, d, err)
						}
						bad, err := c.Do(ctx, c.B().Eval().Script(coverScript).Numkeys(1).Key(hash).Arg("", redisstore.LimitDef(l, 0)).Build()).AsStrSlice()
						if err != nil {
							t.Fatal(err)
						}
						for _, b := range bad {
							t.Fatalf("%v %s, check %d: %s: the state would be forgotten early", a, l.Name, checked+1, b)
						}
					}
					if checked >= 40 {
						break
					}
					if attempt == ttlAttempts {
						t.Fatalf("%v %s: fewer than 40 checks in the first second of a fresh hash in each of %d attempts (%d in the last): the test did not exercise it", a, l.Name, attempt, checked)
					}
					t.Logf("%v %s: only %d checks in the first second of a hash (a loaded machine); again on a fresh hash", a, l.Name, checked)
				}
			}
		}
	})
}

// ttlLua runs the store's own load, check and save (store.lua) of fields
// of KEYS[1] at pinned instants, three arguments per step after ARGV[2]
// (the limit): the instant, the field's number and the cost; after each
// step it checks the invariant (coverLua). The pinned instants lie ahead of
// Redis's clock, and the TTLs are set on them as on Redis's clock (the
// store otherwise keeps a pinned test's keys for ten minutes instead).
var ttlScript = redisstore.ComposeLua(coverLua + `
local p = A.params(ARGV[2])
local alg = A[p.alg]
local key = KEYS[1]
for i = 3, #ARGV, 3 do
	ARGV[1] = ARGV[i]
	T.init()
	T.pinned = false
	local field = string.format('f%07d', tonumber(ARGV[i + 1]))
	local cost = tonumber(ARGV[i + 2])
	local w = S.loadWord(p, key, field)
	local r = {}
	local st = alg.check(p, w.cur, cost, r)
	w.cur = st
	if cost > 0 and (r.allowed or p.cd and st ~= w.orig) then
		S.saveWord(p, w)
	end
	local bad = cover(p, key)
	if #bad > 0 then
		table.insert(bad, 1, 'step ' .. tostring((i - 3) / 3))
		return bad
	end
end
return {}
`)

// On a pinned clock, any sequence: limits of every magnitude, fields of
// one hash checked at instants that creep, jump ahead by up to years, and
// step back, keep the invariant after every step.
func TestTTLCoversStatePinned(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		ahead := time.Now().Add(24 * time.Hour).UnixNano()
		for _, a := range oneWord {
			t.Run(a.String(), func(t *testing.T) {
				rapid.Check(t, func(rt *rapid.T) {
					l := drawLimit(rt, a)
					now := ahead + rapid.Int64Range(0, int64(bouncer.MaxPeriod)).Draw(rt, "start")
					args := []string{"", redisstore.LimitDef(l, 0)}
					for range rapid.IntRange(1, 60).Draw(rt, "steps") {
						switch rapid.IntRange(0, 5).Draw(rt, "advance_kind") {
						case 1, 2:
							now += logTwo(rt, 1, int64(time.Second), "advance")
						case 3:
							now += logTwo(rt, 1, 4*int64(l.Period), "advance")
						case 4:
							now += logTwo(rt, 1, int64(bouncer.MaxPeriod), "advance")
						case 5:
							now = max(now-logTwo(rt, 1, int64(l.Period), "back"), ahead)
						}
						field := rapid.IntRange(0, 5).Draw(rt, "field")
						cost := rapid.Int64Range(0, min(l.Capacity(), 3)).Draw(rt, "cost")
						args = append(args, strconv.FormatInt(now, 10), strconv.Itoa(field), strconv.FormatInt(cost, 10))
					}
					key := keyOn("ttl")
					bad, err := c.Do(context.Background(), c.B().Eval().Script(ttlScript).Numkeys(1).Key(key).Arg(args...).Build()).AsStrSlice()
					if err != nil {
						rt.Fatalf("under %+v: %v", l, err)
					}
					if len(bad) > 0 {
						rt.Fatalf("under %+v: %q", l, bad)
					}
				})
			})
		}
	})
}

func bucket(a bouncer.Algorithm) bool {
	return a == bouncer.TokenBucket || a == bouncer.GCRA || a == bouncer.LeakyBucket
}

// A key added to a hash samples its other fields and deletes the idle
// ones, fresh for a minute; a state that has only just refilled (a client
// below its limit, likely back soon) stays. Two fields, so that the
// sample holds both.
func TestInsertionKeepsRefilledState(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		ctx := context.Background()
		l := bouncer.Limit{Name: "idle", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Millisecond, Burst: 1}
		for _, tc := range []struct {
			later time.Duration
			kept  bool
		}{
			{10 * time.Millisecond, true}, // refilled 9 ms ago
			{59 * time.Second, true},      // refilled 59 s ago
			{61 * time.Second, false},     // idle: fresh for over a minute
		} {
			now := time.Unix(1_800_000_000, 0)
			o := redisstore.Options{Buckets: 1}
			redisstore.PinClock(&o, func() time.Time { return now })
			s := newStore(t, c, o)
			check := func(key string) {
				t.Helper()
				d, err := s.Check(ctx, bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{l}}}, Cost: 1})
				if err != nil || !d.Allowed || d.Degraded {
					t.Fatalf("check %q: %+v, %v", key, d, err)
				}
			}
			check("a")
			now = now.Add(tc.later)
			check("b")
			hash, field := redisstore.StateOf(s, l, "a")
			kept, err := c.Do(ctx, c.B().Hexists().Key(hash).Field(field).Build()).AsBool()
			if err != nil {
				t.Fatal(err)
			}
			if kept != tc.kept {
				t.Errorf("a key refilled %v before another joined its hash: kept %v, want %v", tc.later-time.Millisecond, kept, tc.kept)
			}
		}
	})
}
