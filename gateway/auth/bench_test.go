package auth

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// apiKeyConfig is n keys, "bk_secret_<i>" with the ID "key-<i>".
func apiKeyConfig(n int) APIKeyConfig {
	keys := make([]APIKey, n)
	for i := range keys {
		keys[i] = APIKey{ID: "key-" + strconv.Itoa(i), Hash: HashKey("bk_secret_" + strconv.Itoa(i)), Plan: "pro"}
	}
	return APIKeyConfig{Keys: keys}
}

// BenchmarkAPIKeysAuthenticate measures APIKeys.Authenticate alone with
// n keys configured, presenting one of 1000 of them in turn.
func BenchmarkAPIKeysAuthenticate(b *testing.B) {
	for _, n := range []int{10, 10_000, 1_000_000} {
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
			a, err := NewAPIKeys(apiKeyConfig(n))
			if err != nil {
				b.Fatal(err)
			}
			var reqs []*http.Request
			for i := 0; i < n; i += max(1, n/1000) {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set(DefaultAPIKeyHeader, "bk_secret_"+strconv.Itoa(i))
				reqs = append(reqs, r)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := a.Authenticate(reqs[i]); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(reqs) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkNewAPIKeys measures NewAPIKeys of n keys (an op is one
// build), and reports the heap the APIKeys holds per key (table-B/key)
// and the heap the APIKeyConfig it was built from holds (config-B/key),
// the garbage collected before each reading.
func BenchmarkNewAPIKeys(b *testing.B) {
	for _, n := range []int{1_000_000} {
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
			before := heap()
			c := apiKeyConfig(n)
			withConfig := heap()
			var a *APIKeys
			for b.Loop() {
				a = nil // the previous one is garbage before the next is built
				var err error
				if a, err = NewAPIKeys(c); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after := heap()
			b.ReportMetric(float64(after-withConfig)/float64(n), "table-B/key")
			b.ReportMetric(float64(withConfig-before)/float64(n), "config-B/key")
			runtime.KeepAlive(a)
			runtime.KeepAlive(c)
		})
	}
}

// heap is the bytes of live heap objects, after a collection.
func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkVerifiedTokens measures a hit of the verified-token cache
// from 64 goroutines (RunParallel), over 100 000 tokens remembered, in
// 1 shard (one lock) and in verifiedShards: what the shards save. Each
// goroutine goes through the tokens from a place of its own, so that the
// callers share nothing but the cache.
func BenchmarkVerifiedTokens(b *testing.B) {
	const n = 100_000
	sums := make([][sha256.Size]byte, n)
	for i := range sums {
		sums[i] = sha256.Sum256(fmt.Append(nil, "token ", i))
	}
	now := time.Now()
	claims := decodedAt(now, time.Hour)
	for _, shards := range []int{1, verifiedShards} {
		v := newVerifiedTokens(n, shards)
		for _, s := range sums {
			v.put(s, Identity{Subject: "alice"}, claims, defaultSkew, nil)
		}
		b.Run(fmt.Sprintf("shards=%d/parallel=64", shards), func(b *testing.B) {
			var starts, misses atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				i := int(starts.Add(n/64)) % n
				for pb.Next() {
					if _, ok := v.get(sums[i], now, nil); !ok {
						misses.Add(1)
					}
					if i++; i == n {
						i = 0
					}
				}
			})
			if m := misses.Load(); m > 0 {
				b.Fatalf("%d misses, want none", m)
			}
		})
	}
}

// BenchmarkVerifiedTokensMemory fills a cache of the default size with
// tokens of the claims claimsAt makes (six: sub, iss, aud, plan, iat,
// exp), through JWT.Authenticate, and reports the heap each remembered
// token holds (B/token). An op is one token verified and remembered.
func BenchmarkVerifiedTokensMemory(b *testing.B) {
	hs := signerFor(HS256)
	now := time.Now()
	toks := make([]string, defaultCacheTokens)
	for i := range toks {
		c := claimsAt(now)
		c["sub"] = "user-" + strconv.Itoa(i)
		toks[i] = "Bearer " + sign(b, hs, "", c)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for b.Loop() {
		b.StopTimer()
		j, err := NewJWT(JWTConfig{Keys: []KeySource{{File: keyFile(b, hs), Algorithms: []string{HS256}}}}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		before := heap()
		b.StartTimer()
		for _, tok := range toks {
			r.Header.Set("Authorization", tok)
			if _, err := j.Authenticate(r); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		after := heap()
		if got := j.verified.held.Load(); got != defaultCacheTokens {
			b.Fatalf("%d tokens held, want %d", got, defaultCacheTokens)
		}
		b.ReportMetric(float64(after-before)/defaultCacheTokens, "B/token")
		b.ReportMetric(float64(after-before)/(1<<20), "MiB")
		j.Close()
		b.StartTimer()
	}
}
