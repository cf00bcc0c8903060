package bouncer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
)

// counter admits the first 2 checks of each key, and fails the key "bad".
type counter struct {
	mu     sync.Mutex
	counts map[string]int
	checks atomic.Int64
}

var errBad = errors.New("bad key")

func (c *counter) Check(_ context.Context, r bouncer.Request) (bouncer.Decision, error) {
	c.checks.Add(1)
	k := r.Keys[0].Key
	if k == "bad" {
		return bouncer.Decision{}, errBad
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[k]++
	return bouncer.Decision{Allowed: c.counts[k] <= 2, Remaining: int64(max(0, 2-c.counts[k]))}, nil
}

func (c *counter) Refund(context.Context, bouncer.Request) error { return nil }

// eachCounter is a counter with CheckEach, which decides the requests in
// order and counts its calls.
type eachCounter struct {
	counter
	calls atomic.Int64
}

func (c *eachCounter) CheckEach(ctx context.Context, rs []bouncer.Request, ds []bouncer.Decision, errs []error) {
	c.calls.Add(1)
	for i, r := range rs {
		ds[i], errs[i] = c.Check(ctx, r)
	}
}

func requests(keys ...string) []bouncer.Request {
	l := bouncer.Limit{Name: "l", Algorithm: bouncer.FixedWindow, Rate: 2, Period: time.Minute}
	rs := make([]bouncer.Request, len(keys))
	for i, k := range keys {
		rs[i] = bouncer.Request{Keys: []bouncer.KeyLimits{{Key: k, Limits: []bouncer.Limit{l}}}, Cost: 1}
	}
	return rs
}

// CheckEach decides each request on its own, through the limiter's
// CheckEach when it has one, and with concurrent Checks otherwise.
func TestCheckEach(t *testing.T) {
	plain := &counter{counts: map[string]int{}}
	each := &eachCounter{counter: counter{counts: map[string]int{}}}
	for _, l := range []bouncer.Limiter{plain, each} {
		rs := requests("a", "b", "bad", "a", "a", "c")
		// Buffers too short, or none, are grown; one long enough is used.
		ds, errs := bouncer.CheckEach(context.Background(), l, rs, make([]bouncer.Decision, 2), nil)
		if len(ds) != len(rs) || len(errs) != len(rs) {
			t.Fatalf("%T: %d decisions and %d errors for %d requests", l, len(ds), len(errs), len(rs))
		}
		allowed := map[string]int{}
		for i, r := range rs {
			k := r.Keys[0].Key
			if k == "bad" {
				if !errors.Is(errs[i], errBad) {
					t.Errorf("%T: request %d: error %v, want %v", l, i, errs[i], errBad)
				}
				continue
			}
			if errs[i] != nil {
				t.Errorf("%T: request %d: %v", l, i, errs[i])
			}
			if ds[i].Allowed {
				allowed[k]++
			}
		}
		if want := map[string]int{"a": 2, "b": 1, "c": 1}; !equal(allowed, want) {
			t.Errorf("%T: allowed %v, want %v", l, allowed, want)
		}
	}
	if plain.checks.Load() != 6 {
		t.Errorf("plain limiter: %d checks, want 6", plain.checks.Load())
	}
	if each.calls.Load() != 1 || each.checks.Load() != 6 {
		t.Errorf("each limiter: %d CheckEach calls and %d checks, want 1 and 6", each.calls.Load(), each.checks.Load())
	}
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// CheckEach fills the buffers it is given when they are large enough,
// whatever their length.
func TestCheckEachReusesBuffers(t *testing.T) {
	l := &counter{counts: map[string]int{}}
	buf := make([]bouncer.Decision, 0, 8)
	ds, errs := bouncer.CheckEach(context.Background(), l, requests("a", "b", "c"), buf, make([]error, 5))
	if len(ds) != 3 || len(errs) != 3 || &ds[0] != &buf[:1][0] {
		t.Errorf("got %d decisions and %d errors (in the buffer: %v), want 3 and 3 in the buffer", len(ds), len(errs), &ds[0] == &buf[:1][0])
	}
	if !ds[0].Allowed || errs[0] != nil {
		t.Errorf("first decision %+v, %v; want allowed", ds[0], errs[0])
	}
}
