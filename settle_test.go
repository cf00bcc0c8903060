package bouncer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bouncerhq/bouncer"
)

// recorder is a Charger that records what Settle asked of it.
type recorder struct {
	charged, refunded int64
	charges           bool
}

func (r *recorder) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{Allowed: true}, nil
}
func (r *recorder) Refund(_ context.Context, q bouncer.Request) error {
	r.refunded += q.Cost
	return nil
}

type charger struct{ *recorder }

func (c charger) Charge(_ context.Context, q bouncer.Request) error { c.charged += q.Cost; return nil }

func TestSettle(t *testing.T) {
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{{Name: "l"}}}}, Cost: 10}
	allowed, denied := bouncer.Decision{Allowed: true}, bouncer.Decision{}
	for _, tc := range []struct {
		name                    string
		canCharge               bool
		d                       bouncer.Decision
		actual                  int64
		charged, refunded       int64
		err                     error
		unsupported, invalidReq bool
	}{
		{name: "more is charged", canCharge: true, d: allowed, actual: 25, charged: 15},
		{name: "less is refunded", canCharge: true, d: allowed, actual: 4, refunded: 6},
		{name: "none used: all refunded", canCharge: true, d: allowed, actual: 0, refunded: 10},
		{name: "the estimate: nothing", canCharge: true, d: allowed, actual: 10},
		{name: "denied: nothing reserved", canCharge: true, d: denied, actual: 25, err: bouncer.ErrNotReserved},
		{name: "negative actual", canCharge: true, d: allowed, actual: -1, invalidReq: true},
		{name: "no Charge: more is unsupported", d: allowed, actual: 11, unsupported: true},
		{name: "no Charge: less is still refunded", d: allowed, actual: 3, refunded: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			var l bouncer.Limiter = rec
			if tc.canCharge {
				l = charger{rec}
			}
			err := bouncer.Settle(context.Background(), l, req, tc.d, tc.actual)
			switch {
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Fatalf("err = %v, want %v", err, tc.err)
			case tc.unsupported && !errors.Is(err, errors.ErrUnsupported):
				t.Fatalf("err = %v, want errors.ErrUnsupported", err)
			case tc.invalidReq && !errors.Is(err, bouncer.ErrInvalidRequest):
				t.Fatalf("err = %v, want ErrInvalidRequest", err)
			case tc.err == nil && !tc.unsupported && !tc.invalidReq && err != nil:
				t.Fatalf("err = %v, want nil", err)
			}
			if rec.charged != tc.charged || rec.refunded != tc.refunded {
				t.Fatalf("charged %d, refunded %d; want %d, %d", rec.charged, rec.refunded, tc.charged, tc.refunded)
			}
		})
	}
}
