package httpretry

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/bouncerhq/bouncer/internal/replay"
)

// Transport is an http.RoundTripper that retries what is safe to retry,
// waits what rate-limited servers ask for, and, with Pace, paces requests
// to the quotas they announce.
//
// The zero value is ready to use, with the defaults stated on each field:
//
//	client := &http.Client{Transport: &httpretry.Transport{}}
//
// A Transport is safe for concurrent use by multiple goroutines. Its
// fields must not change after first use, and it must not be copied after
// first use: its budget and its pacing state live in it.
type Transport struct {
	// Base sends each attempt. Nil means http.DefaultTransport.
	Base http.RoundTripper

	// MaxRetries is the most retries of one request after its first
	// attempt. Zero means 3; a negative value turns retries off (pacing,
	// if set, still applies).
	MaxRetries int

	// BaseDelay is the backoff's unit: retry n (counting from 0) after a
	// failure the server gave no wait for is preceded by a random sleep in
	// [0, min(MaxDelay, BaseDelay·2ⁿ)) ("full jitter"). Zero means 100ms.
	BaseDelay time.Duration

	// MaxDelay caps every wait: the backoff, and the waits the server asks
	// for. A failure whose server asks for more is returned as it is, at
	// once, rather than held for a retry the caller may not want. Zero
	// means 20s.
	MaxDelay time.Duration

	// Budget limits retries across all requests through the Transport.
	// Its zero value has the defaults stated on its fields.
	Budget Budget

	// Pace, if set, makes the Transport remember, per host, the quotas
	// announced by the RateLimit and RateLimit-Policy fields (or else
	// X-RateLimit-Remaining and -Reset) and the waits of 429 and 503
	// answers, and hold a request back until the reset of a quota it
	// knows to be spent, if that wait is within MaxDelay and ends before
	// the request's deadline; otherwise the request goes at once and the
	// server decides. A client cannot tell which partition of a policy a
	// request falls in before the answer, so every spent quota of the
	// host holds it back. The memory is bounded: the least recently
	// updated hosts are forgotten beyond 1024.
	Pace bool

	// Now tells the time: for the waits, for Retry-After dates, for
	// pacing and against the request's deadline. Nil means time.Now.
	Now func() time.Time

	// Sleep waits d, or less if ctx is done first, in which case it
	// returns ctx.Err(); every wait of the Transport goes through it. Nil
	// means a timer.
	Sleep func(ctx context.Context, d time.Duration) error

	// Rand returns a pseudo-random number in [0, 1) for the backoff's
	// jitter. It must be safe for concurrent use. Nil means
	// math/rand/v2.Float64.
	Rand func() float64

	pacer pacer
}

// drainLimit bounds how much of a failed attempt's body is read so that
// its connection can be reused; a longer body costs its connection.
const drainLimit = 64 << 10

// RoundTrip sends req, and again after a failure while a retry is safe,
// allowed and can wait as long as it must. It returns the last answer or
// error, or the context's error if the context is done during a wait.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	host := req.URL.Host
	retries := t.maxRetries()
	if !replay.Replayable(req) {
		retries = 0
	}
	r := req
	for attempt := 0; ; attempt++ {
		if t.Pace {
			if err := t.pace(ctx, host); err != nil {
				replay.CloseBody(r)
				return nil, err
			}
		}
		resp, err := t.base().RoundTrip(r)
		now := t.now()
		wait, told, retry := t.failure(ctx, resp, err, attempt, now)
		if t.Pace && resp != nil {
			t.pacer.observe(host, resp.Header, told, now.Add(wait), now)
		}
		if succeeded(resp, err) {
			t.Budget.succeed()
		}
		if !retry || attempt >= retries || wait > t.maxDelay() || ctx.Err() != nil || !fits(ctx, now, wait) {
			return resp, err
		}
		next, rerr := rewind(req)
		if rerr != nil {
			return resp, err
		}
		if !t.Budget.take() {
			replay.CloseBody(next)
			return resp, err
		}
		if resp != nil {
			io.CopyN(io.Discard, resp.Body, drainLimit)
			resp.Body.Close()
		}
		if err := t.sleep(ctx, wait); err != nil {
			replay.CloseBody(next)
			return nil, err
		}
		r = next
	}
}

// CloseIdleConnections closes the idle connections of Base if it has
// such a method, as *http.Transport does, so that
// http.Client.CloseIdleConnections reaches them.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// pace holds a request to host back while the pacer knows a quota of the
// host to be spent, within MaxDelay in all and within the deadline.
func (t *Transport) pace(ctx context.Context, host string) error {
	var waited time.Duration
	for {
		now := t.now()
		wait := t.pacer.take(host, now)
		if wait <= 0 || waited+wait > t.maxDelay() || !fits(ctx, now, wait) {
			return nil
		}
		if err := t.sleep(ctx, wait); err != nil {
			return err
		}
		waited += wait
	}
}

// rewind makes the request of the next attempt, with a fresh body.
func rewind(req *http.Request) (*http.Request, error) {
	next := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return next, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	next.Body = body
	return next, nil
}

func fits(ctx context.Context, now time.Time, wait time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || now.Add(wait).Before(deadline)
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

func (t *Transport) maxRetries() int {
	switch {
	case t.MaxRetries == 0:
		return 3
	case t.MaxRetries < 0:
		return 0
	}
	return t.MaxRetries
}

func (t *Transport) baseDelay() time.Duration {
	if t.BaseDelay == 0 {
		return 100 * time.Millisecond
	}
	return t.BaseDelay
}

func (t *Transport) maxDelay() time.Duration {
	if t.MaxDelay == 0 {
		return 20 * time.Second
	}
	return t.MaxDelay
}

func (t *Transport) now() time.Time {
	if t.Now == nil {
		return time.Now()
	}
	return t.Now()
}

func (t *Transport) rand() float64 {
	if t.Rand == nil {
		return rand.Float64()
	}
	return t.Rand()
}

func (t *Transport) sleep(ctx context.Context, d time.Duration) error {
	if t.Sleep != nil {
		return t.Sleep(ctx, d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
