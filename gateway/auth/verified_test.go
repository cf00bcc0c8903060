package auth

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// digest is a token digest in the given shard, told apart by n.
func digest(shard byte, n int) [sha256.Size]byte {
	var d [sha256.Size]byte
	d[0] = shard
	d[1], d[2] = byte(n), byte(n>>8)
	return d
}

// decodedAt returns claimsAt(now) as decoding a token makes them, with
// numbers as float64, and exp moved to now plus ttl.
func decodedAt(now time.Time, ttl time.Duration) jwt.MapClaims {
	c := claimsAt(now)
	c["iat"] = float64(now.Unix())
	c["exp"] = float64(now.Add(ttl).Unix())
	return c
}

// held counts the tokens in v's shards, checking that each shard's map
// and list agree and that the count v keeps is theirs.
func held(t *testing.T, v *verifiedTokens) int {
	t.Helper()
	n := 0
	for i := range v.shards {
		s := &v.shards[i]
		if len(s.m) != s.lru.Len() {
			t.Errorf("shard %d: %d tokens in its map, %d in its list", i, len(s.m), s.lru.Len())
		}
		n += len(s.m)
	}
	if got := v.held.Load(); got != int64(n) {
		t.Errorf("held says %d tokens, the shards hold %d", got, n)
	}
	return n
}

// TestVerifiedTokensLRU drives a cache of three tokens in one shard step
// by step: each new token past three makes it forget the least recently
// used, a get counting as a use.
func TestVerifiedTokensLRU(t *testing.T) {
	v := newVerifiedTokens(3, verifiedShards)
	claims := decodedAt(t0, time.Hour)
	steps := []struct {
		op  string // "put" or "get"
		tok string
		hit bool // for "get"
	}{
		{"put", "a", false}, {"put", "b", false}, {"put", "c", false},
		{"get", "a", true},  // a, c, b from the newest
		{"put", "d", false}, // forgets b: d, a, c
		{"get", "b", false},
		{"get", "c", true},  // c, d, a
		{"put", "e", false}, // forgets a: e, c, d
		{"get", "a", false},
		{"get", "d", true}, {"get", "c", true}, {"get", "e", true}, // e, c, d
		{"put", "b", false}, // forgets d
		{"get", "d", false},
		{"get", "b", true}, {"get", "c", true}, {"get", "e", true},
	}
	for i, st := range steps {
		sum := digest(0, int(st.tok[0]))
		switch st.op {
		case "put":
			v.put(sum, Identity{Subject: st.tok}, claims, defaultSkew, nil)
		case "get":
			id, ok := v.get(sum, t0, nil)
			if ok != st.hit || ok && id.Subject != st.tok {
				t.Fatalf("step %d, get %s: got %+v, %v; want hit %v", i, st.tok, id, ok, st.hit)
			}
		}
	}
	if n := held(t, v); n != 3 {
		t.Errorf("got %d tokens held, want 3", n)
	}
}

// TestVerifiedTokensBound puts many more tokens than fit, spread over
// the shards: no more than the size are held, and the newest is.
func TestVerifiedTokensBound(t *testing.T) {
	v := newVerifiedTokens(1000, verifiedShards)
	claims := decodedAt(t0, time.Hour)
	for i := range 5000 {
		sum := sha256.Sum256(fmt.Append(nil, "token ", i))
		v.put(sum, Identity{Subject: "alice"}, claims, defaultSkew, nil)
		if _, ok := v.get(sum, t0, nil); !ok {
			t.Fatalf("token %d forgotten as soon as it was put", i)
		}
	}
	if n := held(t, v); n != 1000 {
		t.Errorf("got %d tokens held, want 1000", n)
	}
}

// TestVerifiedTokensExpiry checks that a remembered token is served
// until its exp plus the skew, not at it, and is then forgotten.
func TestVerifiedTokensExpiry(t *testing.T) {
	v := newVerifiedTokens(10, verifiedShards)
	claims := decodedAt(t0, time.Minute)
	sum := digest(3, 1)
	v.put(sum, Identity{Subject: "alice"}, claims, defaultSkew, nil)
	end := t0.Add(time.Minute + defaultSkew)
	if _, ok := v.get(sum, end.Add(-time.Nanosecond), nil); !ok {
		t.Fatal("got a miss just before exp plus the skew, want a hit")
	}
	if id, ok := v.get(sum, end, nil); ok {
		t.Fatalf("got %+v at exp plus the skew, want a miss", id)
	}
	if n := held(t, v); n != 0 {
		t.Errorf("got %d tokens held after the expiry, want 0", n)
	}
}

// TestVerifiedTokensConcurrent has callers put and get tokens at once (a
// test for the race detector) and checks the shards are consistent after.
func TestVerifiedTokensConcurrent(t *testing.T) {
	v := newVerifiedTokens(64, verifiedShards)
	claims := decodedAt(t0, time.Hour)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				sum := sha256.Sum256(fmt.Append(nil, g, " ", i%200))
				if _, ok := v.get(sum, t0, nil); !ok {
					v.put(sum, Identity{Subject: "alice"}, claims, defaultSkew, nil)
				}
			}
		})
	}
	wg.Wait()
	if n := held(t, v); n > 64 {
		t.Errorf("got %d tokens held, want at most 64", n)
	}
}

// TestJWTCacheTokens checks that JWTConfig.CacheTokens sizes the cache,
// 65536 when 0, and that a working set of tokens that fits is verified
// once: 5000 tokens taken in turn, more than the 4096 remembered before
// the size was configurable.
func TestJWTCacheTokens(t *testing.T) {
	clk := newClock()
	hs := signerFor(HS256)
	keys := []KeySource{{File: keyFile(t, hs), Algorithms: []string{HS256}}}
	toks := make([]string, 5000)
	for i := range toks {
		c := claimsAt(clk.Now())
		c["sub"] = fmt.Sprint("user-", i)
		toks[i] = sign(t, hs, "", c)
	}
	for _, tt := range []struct {
		size, want int
	}{{0, 5000}, {3, 3}, {6000, 5000}} {
		t.Run(fmt.Sprint("size=", tt.size), func(t *testing.T) {
			j := newJWT(t, JWTConfig{Keys: keys, CacheTokens: tt.size}, Options{Now: clk.Now})
			if want := int64(cmp.Or(tt.size, defaultCacheTokens)); j.verified.size != want {
				t.Errorf("got a cache of %d tokens, want %d", j.verified.size, want)
			}
			for round := range 2 {
				before := j.lookups.Load()
				for i, tok := range toks {
					if id, err := j.Authenticate(bearer(tok)); err != nil || id.Subject != fmt.Sprint("user-", i) {
						t.Fatalf("round %d, token %d: %+v, %v", round, i, id, err)
					}
				}
				verified := j.lookups.Load() - before
				if want := int64(len(toks)); round == 0 && verified != want {
					t.Errorf("first round: %d tokens verified, want %d", verified, want)
				}
				if round == 1 && tt.size != 3 && verified != 0 {
					t.Errorf("second round: %d tokens verified again, want 0 (all remembered)", verified)
				}
			}
			if n := held(t, j.verified); n != tt.want {
				t.Errorf("got %d tokens held, want %d", n, tt.want)
			}
		})
	}
}

// TestJWTRememberedTokenExpires checks that a token remembered is refused
// at its exp plus the skew, by the injected clock, as expired.
func TestJWTRememberedTokenExpires(t *testing.T) {
	clk := newClock()
	hs := signerFor(HS256)
	j := newJWT(t, JWTConfig{Keys: []KeySource{{File: keyFile(t, hs), Algorithms: []string{HS256}}}}, Options{Now: clk.Now})
	c := claimsAt(clk.Now())
	c["exp"] = clk.Now().Add(time.Minute).Unix()
	tok := sign(t, hs, "", c)
	for range 2 {
		if _, err := j.Authenticate(bearer(tok)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute + defaultSkew - time.Second)
	if _, err := j.Authenticate(bearer(tok)); err != nil {
		t.Fatalf("a second before exp plus the skew: %v", err)
	}
	clk.Advance(time.Second)
	if _, err := j.Authenticate(bearer(tok)); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("at exp plus the skew: %v, want ErrTokenExpired", err)
	}
	if n := held(t, j.verified); n != 0 {
		t.Errorf("got %d tokens held after the expiry, want 0", n)
	}
}
