package memstore

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

var _ store.Sharer = (*Store)(nil)

// shares holds the shares instances recorded for each (key, limit) pair,
// with their expiries on the store's clock. Pairs are few (those of hot
// keys in async mode) and every exchange drops the expired shares of the
// pairs it touches, and all of them once a sweep interval.
type shares struct {
	mu    sync.Mutex
	pairs map[sharePair]map[string]sharedRecord
	swept int64
}

type sharePair struct {
	key string
	lim bouncer.Limit
}

type sharedRecord struct {
	share store.Share
	until int64
}

// ExchangeShares implements store.Sharer.
func (s *Store) ExchangeShares(_ context.Context, ttl time.Duration, pairs []bouncer.Request, mine []store.Share) ([][]store.Share, error) {
	if err := store.ValidateShares(pairs, mine); err != nil {
		return nil, err
	}
	sh, now := s.lockShares()
	defer sh.mu.Unlock()
	others := make([][]store.Share, len(pairs))
	for i, r := range pairs {
		others[i] = sh.record(now, r, mine[i], ttl)
	}
	return others, nil
}

// SyncShares implements store.Sharer: the pushes are checks, the shares
// an exchange after them. It fails only for invalid input.
func (s *Store) SyncShares(ctx context.Context, ttl time.Duration, pushes []bouncer.Request, ds []bouncer.Decision, shares []store.SyncShare) ([][]store.Share, error) {
	if err := store.ValidateSync(pushes, ds, shares); err != nil {
		return nil, err
	}
	for i, r := range pushes {
		d, err := s.Check(ctx, r)
		if err != nil {
			return nil, err
		}
		ds[i] = d
	}
	sh, now := s.lockShares()
	defer sh.mu.Unlock()
	others := make([][]store.Share, len(shares))
	for j, x := range shares {
		others[j] = sh.record(now, pushes[x.Pair], x.Share, ttl)
	}
	return others, nil
}

// lockShares locks the store's shares, sweeping them once a second, and
// returns them and the time it read.
func (s *Store) lockShares() (*shares, int64) {
	now := s.now()
	sh := &s.shares
	sh.mu.Lock()
	if sh.pairs == nil {
		sh.pairs = map[sharePair]map[string]sharedRecord{}
	}
	if now-sh.swept >= int64(time.Second) {
		sh.sweep(now)
	}
	return sh, now
}

// record records mine as its instance's share of r's pair for ttl, and
// returns the others' live shares of the pair. sh must be locked.
func (sh *shares) record(now int64, r bouncer.Request, mine store.Share, ttl time.Duration) []store.Share {
	l := r.Keys[0].Limits[0]
	l.Mode, l.OnStoreError = bouncer.Strict, bouncer.StoreErrorDefault
	p := sharePair{r.Keys[0].Key, l}
	recs := sh.pairs[p]
	if recs == nil {
		recs = map[string]sharedRecord{}
		sh.pairs[p] = recs
	}
	recs[mine.Instance] = sharedRecord{mine, now + int64(ttl)}
	for inst, rec := range recs {
		if rec.until <= now {
			delete(recs, inst)
		}
	}
	if len(recs) > store.MaxShareInstances {
		dropFirstExpiring(recs, mine.Instance)
	}
	var others []store.Share
	for inst, rec := range recs {
		if inst != mine.Instance {
			others = append(others, rec.share)
		}
	}
	return others
}

// dropFirstExpiring drops from recs the shares that expire first, but
// mine's, until it holds store.MaxShareInstances.
func dropFirstExpiring(recs map[string]sharedRecord, mine string) {
	insts := make([]string, 0, len(recs))
	for inst := range recs {
		if inst != mine {
			insts = append(insts, inst)
		}
	}
	slices.SortFunc(insts, func(a, b string) int { return cmp.Compare(recs[a].until, recs[b].until) })
	for _, inst := range insts[:len(recs)-store.MaxShareInstances] {
		delete(recs, inst)
	}
}

// sweep drops every expired share, and the pairs left with none.
func (sh *shares) sweep(now int64) {
	sh.swept = now
	for p, recs := range sh.pairs {
		for inst, rec := range recs {
			if rec.until <= now {
				delete(recs, inst)
			}
		}
		if len(recs) == 0 {
			delete(sh.pairs, p)
		}
	}
}
