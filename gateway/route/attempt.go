package route

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/bouncerhq/bouncer/internal/replay"
)

var (
	errNoUpstream = errors.New("route: no healthy upstream")
	errTimeout    = errors.New("route: upstream timed out")
)

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
	if req.URL.RawPath != "" {
		target.RawPath = u.url.EscapedPath() + req.URL.RawPath
	}
	out.URL = &target

	resp, err := u.transport.RoundTrip(out)
	if err != nil {
		timer.Stop()
		cause := context.Cause(ctx)
		cancel(nil)
		switch {
		case req.Context().Err() != nil, errors.As(err, new(*http.MaxBytesError)):
			// The client went away, or sent more body than allowed: the
			// upstream did nothing wrong.
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
// may cure: a connection error (not a timeout, nor the client going
// away), or a 502, 503 or 504 answer.
func retryable(client context.Context, resp *http.Response, err error) bool {
	if err != nil {
		return client.Err() == nil && !errors.Is(err, errTimeout) && !errors.As(err, new(*http.MaxBytesError))
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
