package auth

import (
	"crypto/sha256"
	"maps"
	"sync"
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
type verifiedTokens struct {
	shards [verifiedShards]struct {
		mu sync.RWMutex
		m  map[[sha256.Size]byte]*verifiedToken
	}
}

const (
	verifiedShards = 16
	// maxVerified bounds the tokens remembered, about 200 bytes each
	// besides their claims; past it, one is forgotten for each new one.
	maxVerified = 4096
)

// verifiedToken is a token that verified: its identity, the times that
// bound its validity (skew applied), and the keys of each JWK Set at the
// time.
type verifiedToken struct {
	id        Identity
	notBefore time.Time // the latest of nbf and iat, less the skew; zero if neither
	expires   time.Time // exp plus the skew
	keysets   []*[]*key // one per remote, as remote.keys held it
}

// get returns the identity of the token whose digest is sum, if it
// verified, its keys are still the current ones and now is within its
// times. The identity's Claims are a copy of their own.
func (v *verifiedTokens) get(sum [sha256.Size]byte, now time.Time, remotes []*remote) (Identity, bool) {
	s := &v.shards[sum[0]%verifiedShards]
	s.mu.RLock()
	t := s.m[sum]
	s.mu.RUnlock()
	if t == nil || now.Before(t.notBefore) || !now.Before(t.expires) {
		return Identity{}, false
	}
	for i, r := range remotes {
		if r.keys.Load() != t.keysets[i] {
			return Identity{}, false
		}
	}
	id := t.id
	id.Claims = maps.Clone(t.id.Claims)
	return id, true
}

// put remembers the token whose digest is sum, verified with the keys of
// keysets, as id, with the claims' times and skew.
func (v *verifiedTokens) put(sum [sha256.Size]byte, id Identity, claims jwt.MapClaims, skew time.Duration, keysets []*[]*key) {
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return // verified tokens have one; nothing to remember otherwise
	}
	t := &verifiedToken{id: id, expires: exp.Add(skew), keysets: keysets}
	t.id.Claims = maps.Clone(id.Claims)
	for _, get := range []func() (*jwt.NumericDate, error){claims.GetNotBefore, claims.GetIssuedAt} {
		if d, err := get(); err == nil && d != nil && d.Add(-skew).After(t.notBefore) {
			t.notBefore = d.Add(-skew)
		}
	}
	s := &v.shards[sum[0]%verifiedShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[[sha256.Size]byte]*verifiedToken{}
	}
	if len(s.m) >= maxVerified/verifiedShards {
		for k := range s.m {
			delete(s.m, k) // any one: a map's order is random
			break
		}
	}
	s.m[sum] = t
}
