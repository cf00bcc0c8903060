package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/store"
)

func TestValidateShares(t *testing.T) {
	l := bouncer.Limit{Name: "s", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Second}
	pair := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{l}}}, Cost: 1}
	twoKeys := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "a", Limits: []bouncer.Limit{l}}, {Key: "b", Limits: []bouncer.Limit{l}}}, Cost: 1}
	l2 := l
	l2.Name = "t"
	twoLimits := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{l, l2}}}, Cost: 1}
	share := func(inst string) store.Share { return store.Share{Instance: inst, Demand: 1, Allowance: 1} }
	longest := strings.Repeat("i", store.MaxInstanceName)
	for _, tc := range []struct {
		name  string
		pairs []bouncer.Request
		mine  []store.Share
		want  error
	}{
		{"none", nil, nil, nil},
		{"one", []bouncer.Request{pair}, []store.Share{share("a")}, nil},
		{"longest instance name", []bouncer.Request{pair}, []store.Share{share(longest)}, nil},
		{"instance name too long", []bouncer.Request{pair}, []store.Share{share(longest + "i")}, bouncer.ErrInvalidRequest},
		{"no instance", []bouncer.Request{pair}, []store.Share{share("")}, bouncer.ErrInvalidRequest},
		{"more shares than pairs", []bouncer.Request{pair}, []store.Share{share("a"), share("a")}, bouncer.ErrInvalidRequest},
		{"two keys", []bouncer.Request{twoKeys}, []store.Share{share("a")}, bouncer.ErrInvalidRequest},
		{"two limits", []bouncer.Request{twoLimits}, []store.Share{share("a")}, bouncer.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := store.ValidateShares(tc.pairs, tc.mine)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}
