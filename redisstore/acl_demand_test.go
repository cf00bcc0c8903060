//go:build unix

package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/redisstore"
)

// aclDemands shares RLQS demands through s, with the store's API of
// either shape: ShareDemand (before RLQS divided each bucket once an
// epoch), or RecordDemand, DemandsAt and Claim (since), so that the ACL
// tests hold across that change.
func aclDemands(t *testing.T, s *redisstore.Store) {
	t.Helper()
	ctx := t.Context()
	switch d := any(s).(type) {
	case epochDemands:
		epoch, err := d.RecordDemand(ctx, "bucket", "a", 2, time.Second, time.Minute)
		if err != nil {
			t.Fatalf("RecordDemand: %v", err)
		}
		if _, err := d.DemandsAt(ctx, "bucket", epoch, time.Second); err != nil {
			t.Fatalf("DemandsAt: %v", err)
		}
		if _, err := d.Claim(ctx, "bucket", epoch, 10, 1); err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if err := d.ForgetDemand(ctx, "bucket", "a", time.Second); err != nil {
			t.Fatalf("ForgetDemand: %v", err)
		}
	case sharedDemands:
		if _, err := d.ShareDemand(ctx, "bucket", "a", 2, time.Minute); err != nil {
			t.Fatalf("ShareDemand: %v", err)
		}
		if err := d.ForgetDemand(ctx, "bucket", "a"); err != nil {
			t.Fatalf("ForgetDemand: %v", err)
		}
	default:
		t.Fatal("the store shares no RLQS demands")
	}
}

type sharedDemands interface {
	ShareDemand(ctx context.Context, bucket, client string, demand float64, ttl time.Duration) (map[string]float64, error)
	ForgetDemand(ctx context.Context, bucket, client string) error
}

type epochDemands interface {
	RecordDemand(ctx context.Context, bucket, client string, demand float64, interval, ttl time.Duration) (int64, error)
	DemandsAt(ctx context.Context, bucket string, epoch int64, interval time.Duration) (map[string]float64, error)
	Claim(ctx context.Context, bucket string, epoch int64, free, amount float64) (float64, error)
	ForgetDemand(ctx context.Context, bucket, client string, interval time.Duration) error
}
