package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/bouncerhq/bouncer/store"
)

// MaxRecords bounds the records a memory store holds (store.Records):
// a put past it fails.
const MaxRecords = 1 << 20

// records are the store's store.Records, saved with its states.
type records struct {
	mu sync.Mutex
	m  map[string][]byte
}

var _ store.Records = (*Store)(nil)

// GetRecord returns the record under key (store.Records).
func (s *Store) GetRecord(_ context.Context, key string) ([]byte, bool, error) {
	s.records.mu.Lock()
	defer s.records.mu.Unlock()
	v, ok := s.records.m[key]
	return slices.Clone(v), ok, nil
}

// PutRecord stores value under key (store.Records).
func (s *Store) PutRecord(_ context.Context, key string, value []byte) error {
	if err := store.ValidateRecord(key, value); err != nil {
		return err
	}
	s.records.mu.Lock()
	defer s.records.mu.Unlock()
	if _, ok := s.records.m[key]; !ok && len(s.records.m) >= MaxRecords {
		return fmt.Errorf("memstore: %d records, the most a store holds", MaxRecords)
	}
	if s.records.m == nil {
		s.records.m = map[string][]byte{}
	}
	s.records.m[key] = slices.Clone(value)
	return nil
}

// DeleteRecord removes the record under key, if any (store.Records).
func (s *Store) DeleteRecord(_ context.Context, key string) error {
	s.records.mu.Lock()
	defer s.records.mu.Unlock()
	delete(s.records.m, key)
	return nil
}

// appendRecords appends a tagRecord section per record.
func (s *Store) appendRecords(buf []byte) ([]byte, int) {
	s.records.mu.Lock()
	defer s.records.mu.Unlock()
	for k, v := range s.records.m {
		buf = append(buf, tagRecord)
		buf = appendBytes(buf, []byte(k))
		buf = appendBytes(buf, v)
	}
	return buf, len(s.records.m)
}
