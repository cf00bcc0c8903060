package edge

import (
	"context"
	"slices"
	"testing"
	"time"
)

// recorder is a Giver that records what it is asked to give back.
type recorder struct {
	Hold
	parts []Part
}

func (r *recorder) GiveBack(_ context.Context, p Part) { r.parts = append(r.parts, p) }

func newRecorder(ctx context.Context, leases, refunds bool) *recorder {
	r := &recorder{}
	r.Init(ctx, r)
	r.Leases, r.Refunds = leases, refunds
	return r
}

func TestHoldRun(t *testing.T) {
	for _, tc := range []struct {
		name            string
		leases, refunds bool
		failed, panics  bool
		want            []Part
	}{
		{name: "served", leases: true, refunds: true, want: []Part{Leases}},
		{name: "failed", leases: true, refunds: true, failed: true, want: []Part{Leases, Failed}},
		{name: "failed without refunds", leases: true, failed: true, want: []Part{Leases}},
		{name: "panicked", leases: true, refunds: true, panics: true, want: []Part{Leases, Failed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder(t.Context(), tc.leases, tc.refunds)
			func() {
				defer func() {
					if p := recover(); (p != nil) != tc.panics {
						t.Errorf("recovered %v, want a panic: %v", p, tc.panics)
					}
				}()
				r.Run(func() bool {
					if tc.panics {
						panic("handler")
					}
					return tc.failed
				})
			}()
			if !slices.Equal(r.parts, tc.want) {
				t.Errorf("gave back %v, want %v", r.parts, tc.want)
			}
			r.Done(true) // a second end gives back nothing more
			if !slices.Equal(r.parts, tc.want) {
				t.Errorf("after a second Done: gave back %v, want %v", r.parts, tc.want)
			}
		})
	}
}

// A client that goes away frees its leases while the handler still runs,
// and the end of the request gives them back no second time.
func TestHoldClientGone(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r := newRecorder(ctx, true, false)
	released := make(chan struct{})
	var during []Part
	r.Run(func() bool {
		cancel()
		// context.AfterFunc runs Release on its own goroutine: wait for
		// the Hold's once to have run, through a second Release.
		r.Release()
		close(released)
		during = slices.Clone(r.parts)
		return false
	})
	<-released
	if !slices.Equal(during, []Part{Leases}) || !slices.Equal(r.parts, []Part{Leases}) {
		t.Errorf("during the handler %v, after %v; want the leases given back once", during, r.parts)
	}
}

func TestHoldWait(t *testing.T) {
	r := newRecorder(t.Context(), true, true)
	over, err := r.Wait(3*time.Second, time.Second)
	if err != nil || over != 2*time.Second {
		t.Errorf("a delay over the bound: got %v, %v; want refused, 2s over", over, err)
	}
	if !slices.Equal(r.parts, []Part{Unserved}) || r.Leases || r.Refunds {
		t.Errorf("a refused request gave back %v (leases %v, refunds %v), want everything, once", r.parts, r.Leases, r.Refunds)
	}
	r.Done(true)
	if len(r.parts) != 1 {
		t.Errorf("after Done: gave back %v, want nothing more", r.parts)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r = newRecorder(ctx, true, false)
	if _, err := r.Wait(time.Hour, 2*time.Hour); err != context.Canceled {
		t.Errorf("a client gone while held: got %v, want context.Canceled", err)
	}
	if !slices.Equal(r.parts, []Part{Unserved}) {
		t.Errorf("a client gone while held gave back %v, want everything", r.parts)
	}

	r = newRecorder(t.Context(), false, false)
	if over, err := r.Wait(time.Millisecond, time.Second); over != 0 || err != nil || len(r.parts) != 0 {
		t.Errorf("a short delay: got %v, %v, gave back %v; want it waited, nothing given back", over, err, r.parts)
	}
}

func TestNilHoldRuns(t *testing.T) {
	var h *Hold
	ran := false
	h.Run(func() bool { ran = true; return true })
	h.Done(true)
	if !ran {
		t.Error("a nil Hold did not run its request")
	}
}
