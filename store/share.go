package store

import (
	"context"
	"fmt"
	"time"

	"github.com/bouncerhq/bouncer"
)

// Share is what one instance deciding an async limit on its own (package
// hybrid) tells the others of one (key, limit) pair at each sync: how
// much it is asked for, and how much it may admit before its next sync.
type Share struct {
	// Instance names the instance, uniquely among those sharing a store:
	// at most MaxInstanceName bytes, any bytes.
	Instance string
	// Demand is the units a second the instance was asked for lately,
	// admitted or not.
	Demand float64
	// Allowance is the most units the instance admits from when the
	// share is recorded until its next sync.
	Allowance int64
	// Window is the fixed window Allowance belongs to (the Unix time in ns
	// divided by the limit's period); 0 for the other algorithms.
	Window int64

	// Region names the instance's region, when instances in several
	// regions share a limit, each region counting in a store of its own
	// (see hybrid.Options.Region); "" otherwise.
	Region string
	// Used is what the instance's region had counted of the pair's fixed
	// window Window when the share was recorded (0 if unknown).
	Used int64
	// At is when the instance recorded the share, on its clock, in ns
	// since the Unix epoch.
	At int64
}

// Sharer is a shared store in which instances deciding async limits on
// their own exchange their shares: each sync of package hybrid records
// every instance's share of the pairs it pushes, and learns the others'.
// Both stores implement it.
type Sharer interface {
	bouncer.Limiter
	// ExchangeShares records mine[i] as its instance's share of pairs[i]
	// (a request of one key and one limit), to expire after ttl on the
	// store's clock, and returns in others[i] the shares of the other
	// instances for that pair that have not expired, in no particular
	// order. A share recorded again replaces the instance's last one. A
	// pair keeps at most MaxShareInstances shares: recording one more
	// drops those that expire first (never the one just recorded). It
	// fails as a whole (err != nil) when the store cannot answer.
	ExchangeShares(ctx context.Context, ttl time.Duration, pairs []bouncer.Request, mine []Share) (others [][]Share, err error)
	// SyncShares is a sync of package hybrid in one call to the store: it
	// decides pushes[i] into ds[i], each request of one key and one
	// limit, as Check would decide them one after another; then records
	// each of shares after its pair's push, as ExchangeShares records
	// mine[i] of pairs[i] for ttl, and returns in others[j] the others'
	// shares of the pair of shares[j]. It never decides by a
	// StoreErrorPolicy: when the store cannot answer it fails as a whole
	// (err != nil), and ds says nothing.
	SyncShares(ctx context.Context, ttl time.Duration, pushes []bouncer.Request, ds []bouncer.Decision, shares []SyncShare) (others [][]Share, err error)
}

// SyncShare is a share SyncShares records: Share, of the pair pushed by
// the sync's push number Pair.
type SyncShare struct {
	Pair  int
	Share Share
}

// Bounds of what ExchangeShares keeps.
const (
	// MaxInstanceName is the longest instance name, in bytes.
	MaxInstanceName = 128
	// MaxShareInstances is the most shares a pair keeps.
	MaxShareInstances = 1024
)

// ValidateShares reports an error wrapping bouncer.ErrInvalidRequest if
// ExchangeShares cannot take pairs and mine: as many shares as pairs,
// each pair a valid request of exactly one key and one limit, each share
// naming its instance, and its region if any, in at most MaxInstanceName
// bytes each.
func ValidateShares(pairs []bouncer.Request, mine []Share) error {
	if len(pairs) != len(mine) {
		return fmt.Errorf("%w: %d pairs and %d shares", bouncer.ErrInvalidRequest, len(pairs), len(mine))
	}
	for i, r := range pairs {
		if len(r.Keys) != 1 || len(r.Keys[0].Limits) != 1 {
			return fmt.Errorf("%w: pair %d: want one key and one limit", bouncer.ErrInvalidRequest, i)
		}
		if mine[i].Instance == "" {
			return fmt.Errorf("%w: share %d names no instance", bouncer.ErrInvalidRequest, i)
		}
		if len(mine[i].Instance) > MaxInstanceName {
			return fmt.Errorf("%w: share %d: an instance name of %d bytes, over %d", bouncer.ErrInvalidRequest, i, len(mine[i].Instance), MaxInstanceName)
		}
		if len(mine[i].Region) > MaxInstanceName {
			return fmt.Errorf("%w: share %d: a region name of %d bytes, over %d", bouncer.ErrInvalidRequest, i, len(mine[i].Region), MaxInstanceName)
		}
		if err := Validate(r); err != nil {
			return err
		}
	}
	return nil
}

// ValidateSync reports an error wrapping bouncer.ErrInvalidRequest if
// SyncShares cannot take pushes and shares: each push a valid request
// of exactly one key and one limit, as many decisions as pushes, each
// share's Pair a push, its Share as ValidateShares has it.
func ValidateSync(pushes []bouncer.Request, ds []bouncer.Decision, shares []SyncShare) error {
	if len(ds) != len(pushes) {
		return fmt.Errorf("%w: %d pushes and %d decisions", bouncer.ErrInvalidRequest, len(pushes), len(ds))
	}
	pairs, mine := make([]bouncer.Request, len(shares)), make([]Share, len(shares))
	for j, sh := range shares {
		if sh.Pair < 0 || sh.Pair >= len(pushes) {
			return fmt.Errorf("%w: share %d of push %d, of %d pushes", bouncer.ErrInvalidRequest, j, sh.Pair, len(pushes))
		}
		pairs[j], mine[j] = pushes[sh.Pair], sh.Share
	}
	if err := ValidateShares(pairs, mine); err != nil {
		return err
	}
	for i, r := range pushes {
		if len(r.Keys) != 1 || len(r.Keys[0].Limits) != 1 {
			return fmt.Errorf("%w: push %d: want one key and one limit", bouncer.ErrInvalidRequest, i)
		}
		if err := Validate(r); err != nil {
			return err
		}
	}
	return nil
}
