package redisstore

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/store"
)

var _ store.Records = (*Store)(nil)

// recordsKey is the hash of the store's records: one hash, in one slot
// of a Cluster, for the few records the rules engine keeps.
func (s *Store) recordsKey() string { return s.prefix + ":records" }

// GetRecord returns the record under key (store.Records), with the
// store's timeout.
func (s *Store) GetRecord(ctx context.Context, key string) ([]byte, bool, error) {
	if !s.ready.Load() {
		return nil, false, s.errConnecting()
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	v, err := s.client.Do(ctx, s.client.B().Hget().Key(s.recordsKey()).Field(key).Build()).AsBytes()
	if rueidis.IsRedisNil(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, wrap(err)
	}
	return v, true, nil
}

// PutRecord stores value under key (store.Records).
func (s *Store) PutRecord(ctx context.Context, key string, value []byte) error {
	if err := store.ValidateRecord(key, value); err != nil {
		return err
	}
	if !s.ready.Load() {
		return s.errConnecting()
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return wrapErr(s.client.Do(ctx, s.client.B().Hset().Key(s.recordsKey()).FieldValue().FieldValue(key, rueidis.BinaryString(value)).Build()).Error())
}

// DeleteRecord removes the record under key, if any (store.Records).
func (s *Store) DeleteRecord(ctx context.Context, key string) error {
	if !s.ready.Load() {
		return s.errConnecting()
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return wrapErr(s.client.Do(ctx, s.client.B().Hdel().Key(s.recordsKey()).Field(key).Build()).Error())
}

// wrapErr is wrap for an error that may be nil.
func wrapErr(err error) error {
	if err == nil {
		return nil
	}
	return wrap(err)
}
