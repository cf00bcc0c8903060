package auth

import (
	"container/list"
	"crypto/sha256"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// verifiedTokens remembers the tokens a JWT verified, by the SHA-256 of
// their bytes, so that a client presenting its token again (as API
// clients do on every request for the token's life) is not parsed and
// verified again. What a hit skips is only what depends on the token's
// bytes and the keys: its times are checked on every request, and a hit
// counts only while every JWK Set is the one the token was verified with.
// Failed tokens are never remembered, so no client can fill it with
// tokens of its own making.
//
// It holds at most size tokens (and for a moment one more for each put
// under way). Past that, each new token makes it forget the least
// recently used token of one shard: the new token's, or the next one that
// has another. Each shard has a lock of its own, so that callers
// presenting different tokens seldom wait for one another; a working set
// of at most size tokens is never evicted, however the shards divide it.
type verifiedTokens struct {
	size   int64
	held   atomic.Int64 // tokens in all shards
	shards []verifiedShard
}

// verifiedShard holds the tokens whose digest falls to it, most recently
// used first.
type verifiedShard struct {
	mu  sync.Mutex
	m   map[[sha256.Size]byte]*list.Element // of lru, whose Value is a *verifiedToken
	lru list.List
}

const (
	verifiedShards = 16
	// defaultCacheTokens is JWTConfig.CacheTokens when it is 0, and
	// maxCacheTokens its greatest value.
	defaultCacheTokens = 65536
	maxCacheTokens     = 1 << 24
)

// newVerifiedTokens returns a verifiedTokens of at most size tokens in
// the given number of shards.
func newVerifiedTokens(size, shards int) *verifiedTokens {
	v := &verifiedTokens{size: int64(size), shards: make([]verifiedShard, shards)}
	for i := range v.shards {
		v.shards[i].m = map[[sha256.Size]byte]*list.Element{}
	}
	return v
}

// verifiedToken is a token that verified: its digest, its identity, the
// times that bound its validity (skew applied), and the keys of each JWK
// Set at the time. It is not changed once remembered.
type verifiedToken struct {
	sum       [sha256.Size]byte
	id        Identity
	notBefore time.Time // the latest of nbf and iat, less the skew; zero if neither
	expires   time.Time // exp plus the skew
	keysets   []*[]*key // one per remote, as remote.keys held it
}

func (v *verifiedTokens) shard(sum [sha256.Size]byte) *verifiedShard {
	return &v.shards[int(sum[0])%len(v.shards)]
}

// get returns the identity of the token whose digest is sum, if it
// verified, its keys are still the current ones and now is within its
// times, and makes it the most recently used. A token past its expiry or
// verified with keys no longer current is forgotten. The identity's
// Claims are a copy of their own.
func (v *verifiedTokens) get(sum [sha256.Size]byte, now time.Time, remotes []*remote) (Identity, bool) {
	s := v.shard(sum)
	s.mu.Lock()
	e := s.m[sum]
	if e == nil {
		s.mu.Unlock()
		return Identity{}, false
	}
	t := e.Value.(*verifiedToken)
	if !now.Before(t.expires) || !t.current(remotes) {
		v.remove(s, e)
		s.mu.Unlock()
		return Identity{}, false
	}
	if now.Before(t.notBefore) {
		s.mu.Unlock()
		return Identity{}, false
	}
	s.lru.MoveToFront(e)
	s.mu.Unlock()
	id := t.id
	id.Claims = maps.Clone(t.id.Claims)
	return id, true
}

// current reports whether every JWK Set is the one t was verified with.
func (t *verifiedToken) current(remotes []*remote) bool {
	for i, r := range remotes {
		if r.keys.Load() != t.keysets[i] {
			return false
		}
	}
	return true
}

// put remembers the token whose digest is sum, verified with the keys of
// keysets, as id, with the claims' times and skew, as the most recently
// used.
func (v *verifiedTokens) put(sum [sha256.Size]byte, id Identity, claims jwt.MapClaims, skew time.Duration, keysets []*[]*key) {
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return // verified tokens have one; nothing to remember otherwise
	}
	t := &verifiedToken{sum: sum, id: id, expires: exp.Add(skew), keysets: keysets}
	t.id.Claims = maps.Clone(id.Claims)
	for _, get := range []func() (*jwt.NumericDate, error){claims.GetNotBefore, claims.GetIssuedAt} {
		if d, err := get(); err == nil && d != nil && d.Add(-skew).After(t.notBefore) {
			t.notBefore = d.Add(-skew)
		}
	}
	s := v.shard(sum)
	s.mu.Lock()
	if e, ok := s.m[sum]; ok {
		e.Value = t
		s.lru.MoveToFront(e)
		s.mu.Unlock()
		return
	}
	s.m[sum] = s.lru.PushFront(t)
	s.mu.Unlock()
	if v.held.Add(1) > v.size {
		v.evict(sum, t)
	}
}

// evict forgets the least recently used token of the shard of sum, or of
// the next shard that holds a token other than t.
func (v *verifiedTokens) evict(sum [sha256.Size]byte, t *verifiedToken) {
	first := int(sum[0]) % len(v.shards)
	for i := range v.shards {
		s := &v.shards[(first+i)%len(v.shards)]
		s.mu.Lock()
		if e := s.lru.Back(); e != nil && e.Value != t {
			v.remove(s, e)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// remove forgets e, of s, whose lock the caller holds.
func (v *verifiedTokens) remove(s *verifiedShard, e *list.Element) {
	delete(s.m, e.Value.(*verifiedToken).sum)
	s.lru.Remove(e)
	v.held.Add(-1)
}
