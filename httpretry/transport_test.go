package httpretry_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/httpretry"
)

var ok = reply{status: http.StatusOK}

func TestServerWait(t *testing.T) {
	c := newClock()
	date := c.Now().Add(4 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		want   time.Duration
	}{
		{"Retry-After seconds", 429, h("Retry-After", "3"), 3 * time.Second},
		{"Retry-After date", 429, h("Retry-After", date), 4 * time.Second},
		{"RateLimit r=0", 429, h("RateLimit", `"default";r=0;t=5`), 5 * time.Second},
		{"X-RateLimit-Reset", 429, h("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "6"), 6 * time.Second},
		{"the longer wins", 429, h("Retry-After", "2", "RateLimit", `"default";r=0;t=7`), 7 * time.Second},
		{"the longer wins the other way", 429, h("Retry-After", "8", "RateLimit", `"default";r=0;t=7`), 8 * time.Second},
		{"the spent one of two quotas", 429, h("RateLimit", `"second";r=4;t=1, "day";r=0;t=9`), 9 * time.Second},
		{"503 Retry-After", 503, h("Retry-After", "3"), 3 * time.Second},
		{"r above 0 is no wait: backoff", 429, h("RateLimit", `"default";r=3;t=9`), 50 * time.Millisecond},
		{"no wait: backoff", 429, nil, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			srv, s := serve(t, reply{status: tc.status, header: tc.header}, ok)
			status, err := get(t.Context(), t, newTransport(srv, c), srv.URL)
			if err != nil || status != 200 {
				t.Fatalf("got %d, %v; want 200", status, err)
			}
			if got := c.Slept(); !slices.Equal(got, []time.Duration{tc.want}) {
				t.Errorf("slept %v, want [%v]", got, tc.want)
			}
			if got := s.attempts(); got != 2 {
				t.Errorf("got %d attempts, want 2", got)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		status   int
		maxDelay time.Duration
		want     []time.Duration
	}{
		{"502", 502, 0, []time.Duration{50 * ms, 100 * ms, 200 * ms}},
		{"503 without a wait", 503, 0, []time.Duration{50 * ms, 100 * ms, 200 * ms}},
		{"504", 504, 0, []time.Duration{50 * ms, 100 * ms, 200 * ms}},
		{"429 without a wait", 429, 0, []time.Duration{50 * ms, 100 * ms, 200 * ms}},
		{"capped", 502, 150 * ms, []time.Duration{50 * ms, 75 * ms, 75 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			srv, s := serve(t, reply{status: tc.status})
			rt := newTransport(srv, c)
			rt.MaxDelay = tc.maxDelay
			status, err := get(t.Context(), t, rt, srv.URL)
			if err != nil || status != tc.status {
				t.Fatalf("got %d, %v; want %d", status, err, tc.status)
			}
			if got := c.Slept(); !slices.Equal(got, tc.want) {
				t.Errorf("slept %v, want %v", got, tc.want)
			}
			if got := s.attempts(); got != 4 {
				t.Errorf("got %d attempts, want 4 (MaxRetries 3 by default)", got)
			}
			// Each failed attempt's body was drained and closed.
			if got := s.connections(); got != 1 {
				t.Errorf("the attempts came on %d connections, want 1", got)
			}
		})
	}
}

func TestJitterIsFull(t *testing.T) {
	for _, tc := range []struct {
		rand float64
		want time.Duration
	}{
		{0, 0},
		{0.25, 25 * time.Millisecond},
		{0.999, 99900 * time.Microsecond},
	} {
		c := newClock()
		srv, _ := serve(t, reply{status: 502}, ok)
		rt := newTransport(srv, c)
		rt.Rand = func() float64 { return tc.rand }
		if status, err := get(t.Context(), t, rt, srv.URL); err != nil || status != 200 {
			t.Fatalf("rand %v: got %d, %v; want 200", tc.rand, status, err)
		}
		if got := c.Slept(); !slices.Equal(got, []time.Duration{tc.want}) {
			t.Errorf("rand %v: slept %v, want [%v]", tc.rand, got, tc.want)
		}
	}
}

func TestConnectionErrors(t *testing.T) {
	t.Run("reset", func(t *testing.T) {
		c := newClock()
		srv, s := serve(t, reply{hangUp: true}, ok)
		status, err := get(t.Context(), t, newTransport(srv, c), srv.URL)
		if err != nil || status != 200 {
			t.Fatalf("got %d, %v; want 200", status, err)
		}
		if got := s.attempts(); got != 2 {
			t.Errorf("got %d attempts, want 2", got)
		}
	})
	t.Run("refused", func(t *testing.T) {
		c := newClock()
		srv, s := serve(t, ok)
		closed, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		refused := closed.Addr().String()
		closed.Close()
		var dials atomic.Int32
		base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 1 {
				addr = refused
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		t.Cleanup(base.CloseIdleConnections)
		rt := newTransport(srv, c)
		rt.Base = base
		status, err := get(t.Context(), t, rt, srv.URL)
		if err != nil || status != 200 {
			t.Fatalf("got %d, %v; want 200", status, err)
		}
		if dials.Load() != 2 || s.attempts() != 1 {
			t.Errorf("got %d dials and %d answers, want 2 and 1", dials.Load(), s.attempts())
		}
		if got := c.Slept(); !slices.Equal(got, []time.Duration{50 * time.Millisecond}) {
			t.Errorf("slept %v, want [50ms]", got)
		}
	})
	t.Run("a bad URL is not retried", func(t *testing.T) {
		c := newClock()
		srv, _ := serve(t, ok)
		if _, err := get(t.Context(), t, newTransport(srv, c), "gopher://"+srv.Listener.Addr().String()); err == nil {
			t.Fatal("got no error, want one")
		}
		if got := c.Slept(); len(got) != 0 {
			t.Errorf("slept %v, want none", got)
		}
	})
}

func TestNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reply      reply
		maxRetries int
	}{
		{"200", ok, 0},
		{"404", reply{status: 404}, 0},
		{"500", reply{status: 500}, 0},
		{"a wait above MaxDelay", reply{status: 429, header: h("Retry-After", "21")}, 0},
		{"MaxRetries negative", reply{status: 503}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			srv, s := serve(t, tc.reply, ok)
			rt := newTransport(srv, c)
			rt.MaxRetries = tc.maxRetries
			status, err := get(t.Context(), t, rt, srv.URL)
			if err != nil || status != tc.reply.status {
				t.Fatalf("got %d, %v; want %d", status, err, tc.reply.status)
			}
			if got := s.attempts(); got != 1 {
				t.Errorf("got %d attempts, want 1", got)
			}
			if got := c.Slept(); len(got) != 0 {
				t.Errorf("slept %v, want none", got)
			}
		})
	}
}

func TestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reply     reply
		baseDelay time.Duration
		want      int
		slept     []time.Duration
	}{
		{"Retry-After beyond the deadline", reply{status: 429, header: h("Retry-After", "30")}, 0, 429, nil},
		{"Retry-After at the deadline", reply{status: 429, header: h("Retry-After", "5")}, 0, 429, nil},
		{"backoff beyond the deadline", reply{status: 503}, 12 * time.Second, 503, nil},
		{"Retry-After within the deadline", reply{status: 429, header: h("Retry-After", "4")}, 0, 200, []time.Duration{4 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			srv, _ := serve(t, tc.reply, ok)
			rt := newTransport(srv, c)
			rt.MaxDelay = time.Minute
			rt.BaseDelay = tc.baseDelay
			ctx, cancel := context.WithDeadline(t.Context(), c.Now().Add(5*time.Second))
			defer cancel()
			status, err := get(ctx, t, rt, srv.URL)
			if err != nil || status != tc.want {
				t.Fatalf("got %d, %v; want %d", status, err, tc.want)
			}
			if got := c.Slept(); !slices.Equal(got, tc.slept) {
				t.Errorf("slept %v, want %v", got, tc.slept)
			}
		})
	}
}

// A caller that gives up while the transport waits to retry gets its
// context's error at once, after one attempt, from the Transport's own
// timer (Sleep nil): the test ends only if the cancellation cuts the 10 s
// wait short. The transport rewinds the request's body for the retry
// just before it waits, and the caller cancels then, so that the wait
// starts with the context done whatever the goroutines' timing (a cancel
// before the transport decides to wait returns the 429 itself).
func TestCancelDuringWait(t *testing.T) {
	srv, s := serve(t, reply{status: 429, header: h("Retry-After", "10")}, ok)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	rewind := req.GetBody
	req.GetBody = func() (io.ReadCloser, error) {
		cancel()
		return rewind()
	}
	_, err = send(&httpretry.Transport{Base: srv.Client().Transport}, req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want %v", err, context.Canceled)
	}
	if got := s.attempts(); got != 1 {
		t.Errorf("got %d attempts, want 1", got)
	}
}
