package store

import (
	"context"
	"errors"
	"fmt"
)

// ForwardRecords is what a Limiter that wraps a store does with the
// store.Records calls it gets: it passes them to next, or fails with an
// error wrapping errors.ErrUnsupported when next keeps no records.
type ForwardRecords struct{ Next any }

func (f ForwardRecords) records() (Records, error) {
	r, ok := f.Next.(Records)
	if !ok {
		return nil, fmt.Errorf("store: %T keeps no records: %w", f.Next, errors.ErrUnsupported)
	}
	return r, nil
}

// GetRecord passes the call to Next.
func (f ForwardRecords) GetRecord(ctx context.Context, key string) ([]byte, bool, error) {
	r, err := f.records()
	if err != nil {
		return nil, false, err
	}
	return r.GetRecord(ctx, key)
}

// PutRecord passes the call to Next.
func (f ForwardRecords) PutRecord(ctx context.Context, key string, value []byte) error {
	r, err := f.records()
	if err != nil {
		return err
	}
	return r.PutRecord(ctx, key, value)
}

// DeleteRecord passes the call to Next.
func (f ForwardRecords) DeleteRecord(ctx context.Context, key string) error {
	r, err := f.records()
	if err != nil {
		return err
	}
	return r.DeleteRecord(ctx, key)
}
