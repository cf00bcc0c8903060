//go:build unix

package redisstore_test

import (
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/redisstore"
)

// aclDemands shares RLQS demands through s as an RLQS server does:
// records a demand, reads the epoch's, claims a share and forgets it.
func aclDemands(t *testing.T, s *redisstore.Store) {
	t.Helper()
	ctx := t.Context()
	epoch, err := s.RecordDemand(ctx, "bucket", "a", 2, time.Second, time.Minute)
	if err != nil {
		t.Fatalf("RecordDemand: %v", err)
	}
	if _, err := s.DemandsAt(ctx, "bucket", epoch, time.Second); err != nil {
		t.Fatalf("DemandsAt: %v", err)
	}
	if _, err := s.Claim(ctx, "bucket", epoch, 10, 1); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if err := s.ForgetDemand(ctx, "bucket", "a", time.Second); err != nil {
		t.Fatalf("ForgetDemand: %v", err)
	}
}

// aclShares exchanges async shares in s, as two instances, on Redis's
// clock.
func aclShares(t *testing.T, s *redisstore.Store) {
	t.Helper()
	pairs, mine := sharePairs(4, "acl")
	if _, err := s.ExchangeShares(t.Context(), time.Minute, pairs, mine); err != nil {
		t.Fatalf("ExchangeShares: %v", err)
	}
	for i := range mine {
		mine[i].Instance = "b"
	}
	if others, err := s.ExchangeShares(t.Context(), time.Minute, pairs, mine); err != nil || len(others[0]) != 1 {
		t.Fatalf("ExchangeShares: got %+v, %v; want a's share of each pair", others, err)
	}
}
