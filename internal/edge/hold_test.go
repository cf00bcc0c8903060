package edge

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
)

// book is a Limiter that keeps what each key's limit was given back.
type book struct {
	mu    sync.Mutex
	given map[string]int64
}

func (b *book) Check(context.Context, bouncer.Request) (bouncer.Decision, error) {
	return bouncer.Decision{Allowed: true}, nil
}

func (b *book) Refund(_ context.Context, r bouncer.Request) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range r.Keys {
		for _, l := range k.Limits {
			b.given[k.Key+"/"+l.Name] += r.Cost
		}
	}
	return nil
}

func (b *book) got() map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.given)
}

var (
	lease = bouncer.Limit{Name: "lease", Algorithm: bouncer.Concurrency, Burst: 1}
	units = bouncer.Limit{Name: "units", Algorithm: bouncer.TokenBucket, Rate: 1, Burst: 1}
)

// newHold is the Hold of a request charged 1 to a key with a lease and
// units, which go back on failure if refunds.
func newHold(ctx context.Context, refunds bool) (*Hold, *book) {
	b := &book{given: map[string]int64{}}
	l := bouncer.NewLedger(b, []bouncer.Charge{{Key: "k", Limits: []bouncer.Limit{lease, units}, Cost: 1, RefundOnFailure: refunds}})
	return NewHold(ctx, l, 0, false, nil), b
}

var (
	leaseBack = map[string]int64{"k/lease": 1}
	allBack   = map[string]int64{"k/lease": 1, "k/units": 1}
)

func TestHoldRun(t *testing.T) {
	for _, tc := range []struct {
		name           string
		refunds        bool
		failed, panics bool
		want           map[string]int64
	}{
		{name: "served", refunds: true, want: leaseBack},
		{name: "failed", refunds: true, failed: true, want: allBack},
		{name: "failed without refunds", failed: true, want: leaseBack},
		{name: "panicked", refunds: true, panics: true, want: allBack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, b := newHold(t.Context(), tc.refunds)
			func() {
				defer func() {
					if p := recover(); (p != nil) != tc.panics {
						t.Errorf("recovered %v, want a panic: %v", p, tc.panics)
					}
				}()
				h.Run(func() bool {
					if tc.panics {
						panic("handler")
					}
					return tc.failed
				})
			}()
			if got := b.got(); !maps.Equal(got, tc.want) {
				t.Errorf("gave back %v, want %v", got, tc.want)
			}
			h.Done(true) // a second end gives back nothing more
			if got := b.got(); !maps.Equal(got, tc.want) {
				t.Errorf("after a second Done: gave back %v, want %v", got, tc.want)
			}
		})
	}
}

// A client that goes away frees its leases while the handler still runs,
// and the end of the request gives them back no second time.
func TestHoldClientGone(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	h, b := newHold(ctx, false)
	var during map[string]int64
	h.Run(func() bool {
		cancel()
		// context.AfterFunc runs Release on its own goroutine; a second
		// Release gives back nothing more, whichever runs first.
		h.Release()
		during = b.got()
		return false
	})
	if !maps.Equal(during, leaseBack) || !maps.Equal(b.got(), leaseBack) {
		t.Errorf("during the handler %v, after %v; want the lease given back once", during, b.got())
	}
}

func TestHoldWait(t *testing.T) {
	h, b := newHold(t.Context(), true)
	over, err := h.Wait(3*time.Second, time.Second)
	if err != nil || over != 2*time.Second {
		t.Errorf("a delay over the bound: got %v, %v; want refused, 2s over", over, err)
	}
	if got := b.got(); !maps.Equal(got, allBack) || h.Holds() {
		t.Errorf("a refused request gave back %v (holds %v), want everything, once", got, h.Holds())
	}
	h.Done(true)
	if got := b.got(); !maps.Equal(got, allBack) {
		t.Errorf("after Done: gave back %v, want nothing more", got)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h, b = newHold(ctx, false)
	if _, err := h.Wait(time.Hour, 2*time.Hour); err != context.Canceled {
		t.Errorf("a client gone while held: got %v, want context.Canceled", err)
	}
	if got := b.got(); !maps.Equal(got, allBack) {
		t.Errorf("a client gone while held gave back %v, want everything", got)
	}

	h, b = newHold(t.Context(), false)
	if over, err := h.Wait(time.Millisecond, time.Second); over != 0 || err != nil || len(b.got()) != 0 {
		t.Errorf("a short delay: got %v, %v, gave back %v; want it waited, nothing given back", over, err, b.got())
	}
}

func TestNilHoldRuns(t *testing.T) {
	var h *Hold
	ran := false
	h.Run(func() bool { ran = true; return true })
	h.Done(true)
	h.Release()
	h.Settle(func(int) (int64, bool) { return 0, true })
	if !ran {
		t.Error("a nil Hold did not run its request")
	}
}
