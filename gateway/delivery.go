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
	"github.com/bouncerhq/bouncer/rules"
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
	ms     metered
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() bool // stops watching the client

	mu       sync.Mutex
	answered bool    // a final status was written
	drains   bool    // a count comes after the body, if at all
	before   []int   // per count of m: the values of its header the response header had
	header   []int64 // the count the response header states
	stated   []bool  // whether it states one
	modelAt  int     // the values of m's model answer header the response header had
	gone     bool    // the client went away
	draining bool    // the rest of the answer is read to learn its count
	drained  int64   // bytes read and discarded since
	cut      error   // the bound the drain hit, if it did
	ended    bool
	timer    *time.Timer
}

// metered is what a decision tells a metered request's settle: the
// model the request named, and the price table of each meter of its
// charges (rules.Response.Prices).
type metered struct {
	model   string
	pricing rules.Pricing
}

// deliver starts the delivery of the answer to client's request, whose
// context is client.
func (m *meter) deliver(sw *recorder.Writer, client context.Context, ms metered) *delivery {
	n := len(m.counts)
	d := &delivery{sw: sw, m: m, ms: ms, before: make([]int, n), header: make([]int64, n), stated: make([]bool, n)}
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
			for i, f := range d.m.counts {
				d.before[i] = len(h[f.name])
				d.header[i], d.stated[i] = count(h.Get(f.name))
				d.drains = d.drains || !d.stated[i] || announced(h, f.name)
			}
			if a := d.m.modelAnswer; a != "" {
				d.modelAt = len(h[a])
				d.drains = d.drains || announced(h, a)
			}
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
	h := d.sw.Header()
	for i, f := range d.m.counts {
		if d.before[i] > 0 && len(h[f.name]) > d.before[i] {
			h[f.name] = h[f.name][d.before[i]:]
			d.before[i] = 0
		}
	}
	if a := d.m.modelAnswer; a != "" && d.modelAt > 0 && len(h[a]) > d.modelAt {
		h[a] = h[a][d.modelAt:]
		d.modelAt = 0
	}
	return d.cut, d.gone
}

// actual is what the request cost its charges of meter, once it has
// ended: nothing answered keeps the estimate; else the bytes relayed, or
// each count's trailer, else its response header (a count stated in
// neither counts 0; none stated keeps the estimate). Meter 0 counts units:
// the one count, or the tokens of every kind; a price table's meter
// counts money: the tokens at the model's prices, a single count at the
// model's highest (as an estimate is reserved; bytes as such a count).
func (d *delivery) actual(meter int) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.answered {
		return 0, false
	}
	u := rules.Usage{Model: d.model()}
	n, single, ok := d.sw.Bytes, true, d.m.bytes
	h := d.sw.Header()
	for i, f := range d.m.counts {
		v, stated := int64(0), false
		if s, t := trailer(h, f.name, d.before[i]); t {
			v, stated = count(s)
		}
		if !stated {
			v, stated = d.header[i], d.stated[i]
		}
		if !stated {
			continue
		}
		ok = true
		switch f.kind {
		case units:
			n = v
		case input:
			u.Input, single = v, false
		case output:
			u.Output, single = v, false
		case cached:
			u.Cached, single = v, false
		}
	}
	if !ok {
		return 0, false
	}
	p := d.ms.pricing.Prices(meter)
	switch {
	case single && p != nil:
		return p.Reserve(n, u.Model), true
	case single:
		return n, true
	case p != nil:
		return p.Cost(u), true
	}
	return u.Units(), true
}

// model is the model the request's prices are read for: the one the
// answer names, where the meter reads it there, else the request's.
func (d *delivery) model() string {
	if a := d.m.modelAnswer; a != "" {
		if v, ok := trailer(d.sw.Header(), a, d.modelAt); ok && v != "" {
			return v
		}
		if v := d.sw.Header().Get(a); v != "" {
			return v
		}
	}
	return d.ms.model
}

// serveMetered serves r on rt through a delivery and settles h at what
// was delivered, whether the answer ends, the client leaves or the
// upstream breaks off, so that every admitted request is settled once.
// aborted says the answer was cut short (the reverse proxy's
// http.ErrAbortHandler), which the caller raises again once h has ended,
// so that the server drops the connection rather than end the body as if
// it were whole. failed is a 5xx, or an upstream that broke off; never a
// client that left.
func (g *Gateway) serveMetered(h *edge.Hold, ms metered, rt *Route, t *route.Target, sw *recorder.Writer, r *http.Request, v *route.View) (failed, aborted bool) {
	d := rt.meter.deliver(sw, r.Context(), ms)
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
