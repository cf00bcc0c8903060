package store

import (
	"context"
	"fmt"
)

// Records is a store's table of small records beside its counts, shared
// as its counts are: on Redis every instance reads what one wrote, and
// the memory store saves them in its state file. The rules engine keeps
// keys' runtime limits there (rules.Engine.SetLimits). A value is opaque
// bytes; a missing key is ok false, not an error.
type Records interface {
	GetRecord(ctx context.Context, key string) (value []byte, ok bool, err error)
	PutRecord(ctx context.Context, key string, value []byte) error
	DeleteRecord(ctx context.Context, key string) error
}

// Bounds on a record, which every store enforces.
const (
	MaxRecordKey   = 4 << 10
	MaxRecordValue = 64 << 10
)

// ValidateRecord reports a record's key or value over its bound, or an
// empty key.
func ValidateRecord(key string, value []byte) error {
	switch {
	case key == "":
		return fmt.Errorf("store: a record's key is empty")
	case len(key) > MaxRecordKey:
		return fmt.Errorf("store: a record's key of %d bytes, at most %d", len(key), MaxRecordKey)
	case len(value) > MaxRecordValue:
		return fmt.Errorf("store: a record of %d bytes, at most %d", len(value), MaxRecordValue)
	}
	return nil
}
