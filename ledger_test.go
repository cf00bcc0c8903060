package bouncer_test

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/bouncerhq/bouncer"
)

// book is a Charger that keeps what each key's limit was given back
// (refunded, negative) or charged after the fact (positive).
type book map[string]int64

func (b book) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{Allowed: true}, nil
}

func (b book) Refund(_ context.Context, r bouncer.Request) error { b.add(r, -r.Cost); return nil }
func (b book) Charge(_ context.Context, r bouncer.Request) error { b.add(r, r.Cost); return nil }

func (b book) add(r bouncer.Request, n int64) {
	for _, k := range r.Keys {
		for _, l := range k.Limits {
			b[k.Key+"/"+l.Name] += n
		}
	}
}

var (
	lease  = bouncer.Limit{Name: "lease", Algorithm: bouncer.Concurrency, Burst: 5}
	rate   = bouncer.Limit{Name: "rate", Algorithm: bouncer.TokenBucket, Rate: 10, Burst: 10}
	shaped = bouncer.Limit{Name: "shaped", Algorithm: bouncer.LeakyBucket, Rate: 10, Burst: 10, Shape: true}
)

// ledgerCharges are one request's charges: a key with a lease and units
// given back on failure, a key without, a shadow rule's, and a metered
// one.
func ledgerCharges() []bouncer.Charge {
	return []bouncer.Charge{
		{Key: "refund", Limits: []bouncer.Limit{lease, rate}, Cost: 2, RefundOnFailure: true},
		{Key: "keep", Limits: []bouncer.Limit{rate, shaped}, Cost: 2},
		{Key: "shadow", Limits: []bouncer.Limit{lease, rate}, Cost: 2, Shadow: true},
		{Key: "meter", Limits: []bouncer.Limit{rate}, Cost: 5, Metered: true, RefundOnFailure: true},
	}
}

// TestLedger ends a request's ledger by each sequence of events and
// checks that what each outcome requires goes back exactly once.
func TestLedger(t *testing.T) {
	leases := book{"refund/lease": -2, "shadow/lease": -2}
	cases := []struct {
		name   string
		events []string
		want   book
	}{
		{"served", []string{"served"}, leases},
		{"release then served", []string{"release", "served"}, leases},
		{"served twice", []string{"served", "served"}, leases},
		{"release twice, the client gone and the end", []string{"release", "release", "served"}, leases},
		{"failed", []string{"failed"}, book{"refund/lease": -2, "refund/rate": -2, "shadow/lease": -2, "meter/rate": -5}},
		{"failed then served", []string{"failed", "served"}, book{"refund/lease": -2, "refund/rate": -2, "shadow/lease": -2, "meter/rate": -5}},
		{"served then failed", []string{"served", "failed"}, leases},
		{"release then failed", []string{"release", "failed"}, book{"refund/lease": -2, "refund/rate": -2, "shadow/lease": -2, "meter/rate": -5}},
		{"unserved", []string{"unserved"}, book{"refund/lease": -2, "refund/rate": -2, "keep/rate": -2, "keep/shaped": -2, "shadow/lease": -2, "meter/rate": -5}},
		{"client gone then served", []string{"release", "unserved", "served"}, book{"refund/lease": -2, "refund/rate": -2, "keep/rate": -2, "keep/shaped": -2, "shadow/lease": -2, "meter/rate": -5}},
		{"settle then served", []string{"settle", "served"}, book{"refund/lease": -2, "shadow/lease": -2, "meter/rate": 3}},
		{"settle then failed", []string{"settle", "failed"}, book{"refund/lease": -2, "refund/rate": -2, "shadow/lease": -2, "meter/rate": 3 - 8}},
		{"settle twice", []string{"settle", "settle", "served"}, book{"refund/lease": -2, "shadow/lease": -2, "meter/rate": 3}},
		{"failed then settle", []string{"failed", "settle"}, book{"refund/lease": -2, "refund/rate": -2, "shadow/lease": -2, "meter/rate": -5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := book{}
			l := bouncer.NewLedger(b, ledgerCharges())
			ctx := context.Background()
			for _, e := range tc.events {
				var err error
				switch e {
				case "release":
					err = l.Release(ctx)
				case "served":
					err = l.End(ctx, bouncer.Served)
				case "failed":
					err = l.End(ctx, bouncer.Failed)
				case "unserved":
					err = l.End(ctx, bouncer.Unserved)
				case "settle":
					err = l.Settle(ctx, func(int) (int64, bool) { return 8, true })
				}
				if err != nil {
					t.Fatalf("%s: %v", e, err)
				}
			}
			if !maps.Equal(b, tc.want) {
				t.Errorf("got %v, want %v", b, tc.want)
			}
		})
	}
}

func TestLedgerHolds(t *testing.T) {
	cases := []struct {
		name                     string
		charges                  []bouncer.Charge
		leases, refunds, metered bool
	}{
		{"nothing", nil, false, false, false},
		{"all", ledgerCharges(), true, true, true},
		{"a peek holds nothing", []bouncer.Charge{{Key: "k", Limits: []bouncer.Limit{lease, rate}, RefundOnFailure: true}}, false, false, false},
		{"a lease", []bouncer.Charge{{Key: "k", Limits: []bouncer.Limit{lease}, Cost: 1, RefundOnFailure: true}}, true, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leases, refunds, metered := bouncer.NewLedger(book{}, tc.charges).Holds()
			if leases != tc.leases || refunds != tc.refunds || metered != tc.metered {
				t.Errorf("got %v %v %v, want %v %v %v", leases, refunds, metered, tc.leases, tc.refunds, tc.metered)
			}
		})
	}
}

// TestLedgerSettleFails keeps the estimate of a charge the store failed
// to settle, or whose actual cost is negative, for End to give back.
func TestLedgerSettleFails(t *testing.T) {
	for _, n := range []int64{-1, 9} {
		b := failing{book{}}
		l := bouncer.NewLedger(b, []bouncer.Charge{{Key: "meter", Limits: []bouncer.Limit{rate}, Cost: 5, Metered: true, RefundOnFailure: true}})
		if err := l.Settle(context.Background(), func(int) (int64, bool) { return n, true }); err == nil {
			t.Errorf("settle at %d: got no error", n)
		}
		if err := l.End(context.Background(), bouncer.Failed); err != nil {
			t.Fatal(err)
		}
		if got := b.book["meter/rate"]; got != -5 {
			t.Errorf("settle at %d: got %d given back, want -5", n, got)
		}
	}
}

// failing is a book whose Charge fails.
type failing struct{ book }

func (failing) Charge(context.Context, bouncer.Request) error { return errors.New("down") }
