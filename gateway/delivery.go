package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/internal/edge"
	"github.com/bouncerhq/bouncer/internal/recorder"
)

// Why a metered request's exchange with its upstream ends early.
var (
	errClientGone = errors.New("gateway: the client went away")
	errDrainTime  = errors.New("gateway: the drain took longer than its usage.drain_timeout")
	errDrainBytes = errors.New("gateway: the drain read more than its usage.drain_bytes")
)

// delivery is a metered request's answer on its way to the client: what
// the client was sent, and, when the client goes away before the count
// has come, the rest of the upstream's answer, read and discarded within
// the meter's bounds to learn it (the drain). The upstream exchange runs
// under ctx, which the client's departure does not end: delivery ends it
// when there is nothing more to learn, or when a bound is hit.
//
// The reverse proxy calls Write and WriteHeader from the request's
// goroutine (WriteHeader for a 1xx answer from the transport's); leave
// runs on either, or on the one that sees the client's context end.
type delivery struct {
	sw     *recorder.Writer
	m      *meter
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() bool // stops watching the client

	mu       sync.Mutex
	answered bool  // a final status was written
	drains   bool  // the count comes after the body, if at all
	before   int   // the values of m's header the response header had
	header   int64 // the count the response header states
	stated   bool  // whether it states one
	gone     bool  // the client went away
	draining bool  // the rest of the answer is read to learn its count
	drained  int64 // bytes read and discarded since
	cut      error // the bound the drain hit, if it did
	ended    bool
	timer    *time.Timer
}

// deliver starts the delivery of the answer to client's request, whose
// context is client.
func (m *meter) deliver(sw *recorder.Writer, client context.Context) *delivery {
	d := &delivery{sw: sw, m: m}
	d.ctx, d.cancel = context.WithCancelCause(context.WithoutCancel(client))
	d.stop = context.AfterFunc(client, d.leave)
	return d
}

func (d *delivery) Header() http.Header { return d.sw.Header() }

// Unwrap lets http.ResponseController reach the connection.
func (d *delivery) Unwrap() http.ResponseWriter { return d.sw }

// WriteHeader notes, with a final status, what the response header says
// of the count, before trailers are added to the same map.
func (d *delivery) WriteHeader(code int) {
	d.mu.Lock()
	if !d.answered && (code >= 200 || code == http.StatusSwitchingProtocols) {
		d.answered = true
		if !d.m.bytes && code != http.StatusSwitchingProtocols {
			h := d.sw.Header()
			d.before = len(h[d.m.actHeader])
			d.header, d.stated = count(h.Get(d.m.actHeader))
			d.drains = !d.stated || announced(h, d.m.actHeader)
		}
	}
	d.mu.Unlock()
	d.sw.WriteHeader(code)
}

// Write sends p to the client while it is there; once it has gone, p is
// drained, or refused when there is nothing to learn, which ends the
// proxy's copy.
func (d *delivery) Write(p []byte) (int, error) {
	d.mu.Lock()
	answered, gone := d.answered, d.gone
	d.mu.Unlock()
	if !answered {
		d.WriteHeader(http.StatusOK)
	}
	rest := p
	if !gone {
		n, err := d.sw.Write(p)
		if err == nil {
			return n, nil
		}
		d.leave()
		rest = p[n:]
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.draining {
		return 0, errClientGone
	}
	d.drained += int64(len(rest))
	if d.drained > d.m.drainBytes {
		d.endDrain(errDrainBytes)
		return 0, errDrainBytes
	}
	return len(p), nil
}

// leave is the client's departure: the exchange ends at once if nothing
// was answered or the count is known (the estimate stands, or the count
// is settled), or goes on as a drain, bounded by m.drainTimeout.
func (d *delivery) leave() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone || d.ended {
		return
	}
	d.gone = true
	if !d.answered || !d.drains {
		d.cancel(errClientGone)
		return
	}
	d.draining = true
	d.timer = time.AfterFunc(d.m.drainTimeout, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.ended && d.draining {
			d.endDrain(errDrainTime)
		}
	})
}

// endDrain stops the drain at the bound it hit; d.mu is held.
func (d *delivery) endDrain(bound error) {
	d.draining, d.cut = false, bound
	d.cancel(bound)
}

// end ends the delivery, once the proxy has returned or aborted: it stops
// watching the client and ends the upstream exchange. It returns the
// bound the drain hit, if it did, and whether the client went away.
//
// The reverse proxy adds an announced trailer's values after the
// header's of the same name, where the client would read the header's
// first: end leaves the trailer's alone, for the meter's header.
func (d *delivery) end() (cut error, gone bool) {
	d.stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ended = true
	if d.timer != nil {
		d.timer.Stop()
	}
	d.cancel(nil)
	if h := d.sw.Header(); d.before > 0 && len(h[d.m.actHeader]) > d.before {
		h[d.m.actHeader] = h[d.m.actHeader][d.before:]
		d.before = 0
	}
	return d.cut, d.gone
}

// actual is what the request cost, once it has ended: nothing answered
// keeps the estimate; else the bytes relayed, or the trailer's count,
// else the response header's. ok false keeps the estimate.
func (d *delivery) actual(int) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case !d.answered:
		return 0, false
	case d.m.bytes:
		return d.sw.Bytes, true
	}
	if n, ok := d.m.trailer(d.sw.Header(), d.before); ok {
		return n, true
	}
	return d.header, d.stated
}

// serveMetered serves r on rt through a delivery and settles h at what
// was delivered, whether the answer ends, the client leaves or the
// upstream breaks off, so that every admitted request is settled once.
// aborted says the answer was cut short (the reverse proxy's
// http.ErrAbortHandler), which the caller raises again once h has ended,
// so that the server drops the connection rather than end the body as if
// it were whole. failed is a 5xx, or an upstream that broke off; never a
// client that left.
func (g *Gateway) serveMetered(h *edge.Hold, rt *Route, t *route.Target, sw *recorder.Writer, r *http.Request, v *route.View) (failed, aborted bool) {
	d := rt.meter.deliver(sw, r.Context())
	defer func() {
		p := recover()
		cut, gone := d.end()
		if cut != nil {
			g.log.Debug("drain stopped at its bound", "route", rt.Name, "err", cut)
		}
		h.Settle(d.actual)
		aborted = p == http.ErrAbortHandler
		failed = sw.Status >= 500 || aborted && !gone
		if p != nil && !aborted {
			panic(p)
		}
	}()
	rt.serve(t, d, r.WithContext(d.ctx), v)
	return false, false
}
