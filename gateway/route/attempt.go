package route

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/bouncerhq/bouncer/internal/replay"
)

var (
	errNoUpstream = errors.New("route: no healthy upstream")
	errTimeout    = errors.New("route: upstream timed out")
)

// clientError is an attempt that failed because of the client: its body
// could not be read (err), or it was still being read from the client
// when the attempt's time ran out (err is errTimeout).
type clientError struct{ err error }

func (e *clientError) Error() string { return "route: the client's request failed: " + e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }

// timeout reports whether the client was too slow: the server's read
// deadline, or the attempt's timeout while its body was being read.
func (e *clientError) timeout() bool {
	var ne net.Error
	return e.err == errTimeout || errors.As(e.err, &ne) && ne.Timeout()
}

// clientBody is a request body as read from the client. It records the
// first error reading it returned, and whether a read is in progress, so
// that a failure of the client is told from one of the upstream.
type clientBody struct {
	io.ReadCloser
	reading atomic.Bool
	err     atomic.Pointer[error]
}

func (b *clientBody) Read(p []byte) (int, error) {
	b.reading.Store(true)
	n, err := b.ReadCloser.Read(p)
	b.reading.Store(false)
	if err != nil && err != io.EOF {
		b.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

// blame returns the client's part in an attempt that failed with err
// (cause, the attempt's own cancellation cause): a *clientError, or nil
// if the client is not at fault. b may be nil.
func (b *clientBody) blame(cause error) *clientError {
	if b == nil {
		return nil
	}
	if p := b.err.Load(); p != nil {
		return &clientError{*p}
	}
	if cause == errTimeout && b.reading.Load() {
		return &clientError{errTimeout}
	}
	return nil
}

// drainLimit bounds how much of a failed attempt's body is read so that
// its connection can be reused; a longer body costs its connection.
const drainLimit = 64 << 10

// RoundTrip is the reverse proxy's transport: it sends req to the next
// available upstream, and again to the next ones while Retries allows,
// the request is safe to send again and the failure is one a retry may
// cure.
func (e *entry) RoundTrip(req *http.Request) (*http.Response, error) {
	u, k := e.pick(-1, e.table.now())
	if u == nil {
		replay.CloseBody(req)
		return nil, errNoUpstream
	}
	retries := e.route.Retries
	if !replay.Replayable(req) {
		retries = 0
	}
	r := req
	for attempt := 0; ; attempt++ {
		resp, err := e.send(r, u)
		if attempt >= retries || !retryable(req.Context(), resp, err) {
			return resp, err
		}
		next, rerr := rewind(req)
		if rerr != nil {
			return resp, err
		}
		nu, nk := e.pick(k, e.table.now())
		if nu == nil {
			replay.CloseBody(next)
			return resp, err
		}
		if resp != nil {
			io.CopyN(io.Discard, resp.Body, drainLimit)
			resp.Body.Close()
		}
		r, u, k = next, nu, nk
	}
}

// send makes one attempt on u, under the route's Timeout, and records
// its outcome. The timeout runs until the response body is closed, or
// until the headers for an upgrade or a gRPC call.
func (e *entry) send(req *http.Request, u *upstream) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(e.timeout, func() { cancel(errTimeout) })
	out := req.WithContext(ctx)
	target := *req.URL
	target.Scheme, target.Host = u.url.Scheme, u.url.Host
	target.Path = u.url.Path + req.URL.Path
	target.RawPath = u.url.EscapedPath() + req.URL.RawPath
	out.URL = &target

	resp, err := u.transport.RoundTrip(out)
	if err != nil {
		timer.Stop()
		cause := context.Cause(ctx)
		cancel(nil)
		x := exchangeOf(req.Context())
		switch ce := x.body.blame(cause); {
		case ce != nil:
			// The client's body failed, or stalled: the upstream did
			// nothing wrong.
			e.record(u, unknown, e.table.now())
			err = ce
		case req.Context().Err() != nil:
			// The client went away.
			e.record(u, unknown, e.table.now())
		case cause == errTimeout:
			e.record(u, failed, e.table.now())
			err = fmt.Errorf("%w: %s", errTimeout, u.raw)
		default:
			e.record(u, failed, e.table.now())
		}
		return nil, err
	}
	o := succeeded
	if resp.StatusCode >= 500 {
		o = failed
	}
	e.record(u, o, e.table.now())
	if resp.Request == nil {
		resp.Request = out
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The body is the tunnel (an io.ReadWriteCloser); ctx ends with
		// the client's request.
		timer.Stop()
		return resp, nil
	}
	if exchangeOf(req.Context()).grpc {
		timer.Stop()
	}
	resp.Body = &attemptBody{ReadCloser: resp.Body, timer: timer, cancel: cancel}
	return resp, nil
}

// attemptBody ends an attempt's timer and context when the response body
// is closed.
type attemptBody struct {
	io.ReadCloser
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

func (b *attemptBody) Close() error {
	err := b.ReadCloser.Close()
	b.timer.Stop()
	b.cancel(nil)
	return err
}

// retryable reports whether an attempt failed in a way another attempt
// may cure: a connection error (not a timeout, nor a failure of the
// client), or a 502, 503 or 504 answer.
func retryable(client context.Context, resp *http.Response, err error) bool {
	if err != nil {
		return client.Err() == nil && !errors.Is(err, errTimeout) && !errors.As(err, new(*clientError))
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// rewind returns req with a fresh body for another attempt.
func rewind(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	next := *req
	next.Body = body
	return &next, nil
}
