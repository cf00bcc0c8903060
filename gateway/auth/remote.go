package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

const (
	defaultRefreshEvery = time.Hour
	defaultMinRefresh   = time.Minute
	// leastMinRefresh bounds MinRefresh from below: it is what stands
	// between a flood of tokens with made-up kids and the issuer.
	leastMinRefresh = time.Second
	fetchTimeout    = 10 * time.Second
	maxJWKSBytes    = 1 << 20
)

// A remote is a JWK Set fetched from a URL. One goroutine, run, does
// every fetch: the first at once, then one every RefreshEvery (MinRefresh
// after a failure), and one when a request asks for it because a token
// names a key the set does not hold, no sooner than MinRefresh after the
// previous fetch began. Requests that ask while a fetch runs wait for
// that one.
type remote struct {
	url      string
	label    string // url without a password, for logs
	client   *http.Client
	every    time.Duration
	min      time.Duration
	restrict []string
	now      func() time.Time
	log      *slog.Logger

	keys atomic.Pointer[[]*key] // nil until a fetch succeeds

	mu       sync.Mutex
	last     time.Time     // when the latest fetch began, by now
	inflight chan struct{} // closed when the fetch that runs ends; nil when none runs
	closed   bool
	kick     chan struct{} // capacity 1: run fetches when it holds a value
}

// checkURL allows https, and http only to a loopback address, where
// nobody on the network can swap the keys.
func checkURL(u *url.URL) error {
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return errors.New("no host")
		}
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
		return errors.New("http is allowed only to a loopback address: use https")
	}
	return fmt.Errorf("scheme %q: use https", u.Scheme)
}

func (r *remote) current() []*key {
	if p := r.keys.Load(); p != nil {
		return *p
	}
	return nil
}

// run fetches until ctx is done.
func (r *remote) run(ctx context.Context) {
	defer r.stop()
	for {
		r.mu.Lock()
		if r.inflight == nil {
			r.inflight = make(chan struct{})
			r.last = r.now()
		}
		done := r.inflight
		select {
		case <-r.kick: // the request that kicked waits on done
		default:
		}
		r.mu.Unlock()

		err := r.fetch(ctx)
		r.mu.Lock()
		r.inflight = nil
		r.mu.Unlock()
		close(done)
		if ctx.Err() != nil {
			return
		}
		wait := r.every
		if err != nil {
			r.log.Warn("auth: fetching a JWK Set failed; the keys fetched before stay", "url", r.label, "err", err, "retry_in", r.min)
			wait = r.min
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-r.kick:
			t.Stop()
		}
	}
}

// stop marks r closed and releases requests waiting for a fetch that
// will not run.
func (r *remote) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.inflight != nil {
		close(r.inflight)
		r.inflight = nil
	}
}

// refresh asks for a fetch because a token names a key the set does not
// hold. It returns a channel closed when that fetch ends, or nil when
// none may start: r is closed, or the latest fetch began less than
// MinRefresh ago.
func (r *remote) refresh() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inflight != nil {
		return r.inflight
	}
	now := r.now()
	if r.closed || now.Sub(r.last) < r.min {
		return nil
	}
	r.inflight = make(chan struct{})
	r.last = now
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return r.inflight
}

func (r *remote) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := checkURL(resp.Request.URL); err != nil {
		return fmt.Errorf("redirected to %s: %w", resp.Request.URL.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxJWKSBytes {
		return fmt.Errorf("a JWK Set over %d bytes", maxJWKSBytes)
	}
	keys, skipped, err := parseJWKS(body, r.restrict, false)
	for _, s := range skipped {
		r.log.Debug("auth: a key of a JWK Set is not used", "url", r.label, "reason", s)
	}
	if err != nil {
		return err
	}
	r.keys.Store(&keys)
	r.log.Debug("auth: fetched a JWK Set", "url", r.label, "keys", len(keys))
	return nil
}
