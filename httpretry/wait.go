package httpretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/bouncerhq/bouncer/header"
)

// failure reports whether an attempt failed in a way a retry can cure,
// and the wait before that retry: what the server asked for (told), or
// else the backoff's.
func (t *Transport) failure(ctx context.Context, resp *http.Response, err error, attempt int, now time.Time) (wait time.Duration, told, retry bool) {
	if err != nil {
		if ctx.Err() != nil || !connectionError(err) {
			return 0, false, false
		}
		return t.backoff(attempt), false, true
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if wait, ok := serverWait(resp.Header, now); ok {
			return wait, true, true
		}
	case http.StatusBadGateway, http.StatusGatewayTimeout:
	default:
		return 0, false, false
	}
	return t.backoff(attempt), false, true
}

// succeeded reports whether an attempt refills the budget: an answer
// below 500 other than 429.
func succeeded(resp *http.Response, err error) bool {
	return err == nil && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests
}

// serverWait is the longest wait h asks for: Retry-After, the reset of
// a RateLimit item with no quota remaining, or X-RateLimit-Reset with no
// quota remaining. ok is false if h asks for none.
func serverWait(h http.Header, now time.Time) (wait time.Duration, ok bool) {
	if v := h.Get("Retry-After"); v != "" {
		wait, ok = header.ParseRetryAfter(v, now)
	}
	for _, it := range header.ParseRateLimit(h.Values("RateLimit")) {
		if it.HasRemaining && it.Remaining <= 0 && it.HasReset {
			wait, ok = max(wait, it.Reset), true
		}
	}
	if l, legacy := header.ParseLegacy(h); legacy && l.Remaining <= 0 && l.Reset > 0 {
		wait, ok = max(wait, l.Reset), true
	}
	return wait, ok
}

// backoff is the full-jitter sleep before retry attempt (from 0): random
// in [0, min(MaxDelay, BaseDelay·2^attempt)).
func (t *Transport) backoff(attempt int) time.Duration {
	ceiling, base := t.maxDelay(), t.baseDelay()
	if attempt < 63 && base <= ceiling>>attempt {
		ceiling = base << attempt
	}
	return time.Duration(t.rand() * float64(ceiling))
}

// connectionError reports whether err says the connection failed before
// any answer: a dial that failed (refused, unreachable, timed out), or a
// connection reset or closed by the server. Other errors (a bad URL, a
// certificate refused, a timeout waiting for the answer) are returned:
// a retry would meet them again, or add to a slow server's load.
func connectionError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
