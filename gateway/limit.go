package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/internal/edge"
	"github.com/bouncerhq/bouncer/rules"
)

// limit decides r's limits, holds r for a shaping delay, and answers a
// request it refuses. ok is false when r is not to go on; h, when r
// holds leases or units given back on failure, is what gives them back.
func (g *Gateway) limit(w http.ResponseWriter, r *http.Request, rt *Route, id auth.Identity, view *route.View, entry *accessEntry) (h *edge.Hold, ms metered, ok bool) {
	req, tooLong := g.descriptors(r, rt, id, view)
	if tooLong != nil {
		// The client's value, not an outage: a 4xx, logged at debug.
		entry.denied = tooLong.code
		g.log.Debug("a limited value is too long", "route", rt.Name, "fact", tooLong.fact, "bytes", tooLong.n)
		writeError(w, r, tooLong.status, tooLong.code, fmt.Sprintf("the request's %s is over %d bytes", tooLong.what, rules.MaxValueLen))
		return nil, ms, false
	}
	if len(req.Descriptors) == 0 {
		return nil, ms, true
	}
	if rt.meter != nil {
		n, err := rt.meter.estimate(r)
		if err != nil {
			// The client's value, not an outage: a 4xx, logged at debug.
			entry.denied = "bad_estimate"
			g.log.Debug("bad estimate", "route", rt.Name, "err", err)
			writeError(w, r, http.StatusBadRequest, "bad_estimate", err.Error())
			return nil, ms, false
		}
		req.HitsAddend = uint64(n)
		if ms.model, err = rt.meter.model(r); err != nil {
			entry.denied = "body_too_large"
			writeError(w, r, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body is over %d bytes", rt.MaxBodyBytes))
			return nil, ms, false
		}
		req.Model = ms.model
	}
	resp, err := g.engine.Decide(r.Context(), req)
	if err != nil {
		if r.Context().Err() == nil {
			g.log.Error("limits not decided", "route", rt.Name, "err", err)
			writeError(w, r, http.StatusServiceUnavailable, "limiter_unavailable", "the rate limiter could not decide this request")
		}
		return nil, ms, false
	}
	if resp.Degraded() {
		w.Header().Set(rules.DegradedHeader, "true")
	}
	if b := resp.Budget(); b != nil {
		w.Header().Set(BudgetHeader, rules.FormatMoney(b.Remaining)+" "+b.Currency)
	}
	d := resp.Delay()
	h = edge.NewHold(r.Context(), resp.Ledger(), d, rt.meter != nil && resp.Code != rules.OverLimit, g.log)
	v, hasValues := resp.Values()
	if resp.Code == rules.OverLimit {
		h.Done(false) // a shadow rule's leases
		g.deny(w, r, rt, entry, v, resp.DenialMessage())
		return nil, ms, false
	}
	if d > 0 {
		// A shaping rule: the request leaves at its turn, or not at all.
		over, err := h.Wait(d, maxDelay)
		if err != nil {
			return nil, ms, false
		}
		if over > 0 {
			v.Denied, v.RetryAfter = true, over
			g.deny(w, r, rt, entry, v, resp.DenialMessage())
			return nil, ms, false
		}
	}
	if hasValues {
		v.Set(w.Header(), header.All)
	}
	if !h.Holds() {
		h = nil
	}
	ms.pricing = resp.Pricing()
	return h, ms, true
}

// BudgetHeader states, on every answer of a route whose rules price its
// usage, the least budget left among them in its currency ("49.50 USD"),
// as the request's decision left it: after its reservation, before its
// settle.
const BudgetHeader = "X-Budget-Remaining"

// maxDelay is the longest a shaping rule holds a request; one that would
// wait longer is refused, with a Retry-After of the excess.
const maxDelay = time.Second

// deny answers a request over a limit: 429 with the rate-limit fields and
// a JSON body, or RESOURCE_EXHAUSTED to a gRPC client.
func (g *Gateway) deny(w http.ResponseWriter, r *http.Request, rt *Route, entry *accessEntry, v header.Values, message string) {
	entry.denied = "rate_limited"
	if g.metrics != nil {
		g.metrics.denied(rt.Name, v.Policy)
	}
	if isGRPC(r) {
		v.Set(w.Header(), header.All)
		writeError(w, r, http.StatusTooManyRequests, "rate_limited", message)
		return
	}
	header.WriteDenied(w, r, v, header.All, message)
}

// tooLong is a limited value over rules.MaxValueLen: the client's
// mistake, answered with status.
type tooLong struct {
	fact, what, code string
	status, n        int
}

// descriptors are r's descriptors under rt's limits: those whose every
// fact r has a value for, each with the caller's plan when the domain
// has plans. A value over rules.MaxValueLen is reported instead.
func (g *Gateway) descriptors(r *http.Request, rt *Route, id auth.Identity, v *route.View) (rules.Request, *tooLong) {
	l := rt.Limits
	req := rules.Request{Domain: l.Domain}
	planKey := ""
	if d := g.engine.Config().Domain(l.Domain); d != nil {
		planKey = d.PlanKey
	}
	var clientIP string
	for _, d := range rt.descriptors {
		entries := make([]rules.Entry, 0, len(d)+1)
		for _, e := range d {
			val := e.value
			if e.fact != "" {
				if e.fact == "client_ip" && clientIP == "" && v.Client.IsValid() {
					clientIP = v.Client.String()
				}
				val = fact(e.fact, r, rt, id, v, clientIP)
				if len(val) > rules.MaxValueLen {
					if e.fact == "path" {
						return req, &tooLong{e.fact, "path", "uri_too_long", http.StatusRequestURITooLong, len(val)}
					}
					return req, &tooLong{e.fact, e.fact, "header_too_large", http.StatusRequestHeaderFieldsTooLarge, len(val)}
				}
			}
			if val == "" {
				entries = nil
				break
			}
			entries = append(entries, rules.Entry{Key: e.key, Value: val})
		}
		if entries == nil {
			continue
		}
		if planKey != "" && id.Plan != "" {
			entries = append(entries, rules.Entry{Key: planKey, Value: id.Plan})
		}
		req.Descriptors = append(req.Descriptors, rules.Descriptor{Entries: entries})
	}
	return req, nil
}

// fact is the value of a descriptor fact for r, or "" if r has none.
func fact(name string, r *http.Request, rt *Route, id auth.Identity, v *route.View, clientIP string) string {
	switch name {
	case "user_id":
		return id.Subject
	case "plan":
		return id.Plan
	case "api_key":
		if id.Method == "api_key" {
			return id.KeyID
		}
		return ""
	case "client_ip":
		return clientIP
	case "route":
		return rt.Name
	case "method":
		return r.Method
	case "path":
		return v.Path
	}
	if h, ok := strings.CutPrefix(name, "header:"); ok {
		return r.Header.Get(h)
	}
	if a, ok := strings.CutPrefix(name, "attribute:"); ok {
		return id.Attribute(a)
	}
	return ""
}
