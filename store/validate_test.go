package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

func TestValidate(t *testing.T) {
	l := bouncer.Limit{Name: "s", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Second, Burst: 1}
	keys := func(ls ...bouncer.Limit) []bouncer.KeyLimits { return []bouncer.KeyLimits{{Key: "k", Limits: ls}} }
	for _, tc := range []struct {
		name string
		r    bouncer.Request
		want error
	}{
		{"check", bouncer.Request{Keys: keys(l), Cost: 1}, nil},
		{"peek", bouncer.Request{Keys: keys(l), Peek: true}, nil},
		{"negative cost", bouncer.Request{Keys: keys(l), Cost: -1}, bouncer.ErrInvalidRequest},
		{"forgotten cost", bouncer.Request{Keys: keys(l)}, bouncer.ErrInvalidRequest},
		{"peek with a cost", bouncer.Request{Keys: keys(l), Cost: 1, Peek: true}, bouncer.ErrInvalidRequest},
		{"no keys", bouncer.Request{Cost: 1}, bouncer.ErrInvalidRequest},
		{"no limits", bouncer.Request{Keys: keys(), Cost: 1}, bouncer.ErrInvalidRequest},
		{"invalid limit", bouncer.Request{Keys: keys(bouncer.Limit{Algorithm: bouncer.GCRA}), Cost: 1}, bouncer.ErrInvalidLimit},
		{"two limits of one name", bouncer.Request{Keys: keys(l, l), Cost: 1}, bouncer.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := store.Validate(tc.r)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}
