package route

import (
	"net/http"
	"net/url"
	"time"
)

// upstream is one of a route's servers and what the route knows of it.
// The fields below mu are guarded by the route's mu.
type upstream struct {
	raw       string   // as configured, for logs and Health
	url       *url.URL // scheme http or https; Path is the base, without a final "/"
	transport http.RoundTripper

	down     bool // the active checks' verdict
	streak   int  // consecutive check results that disagree with down
	failures int  // consecutive failed attempts
	// ejectedUntil is zero unless the upstream is ejected; once it has
	// passed, one trial attempt may go.
	ejectedUntil time.Time
	trial        bool // the trial attempt is in flight
}

func (u *upstream) available(now time.Time) bool {
	if u.down {
		return false
	}
	return u.ejectedUntil.IsZero() || !now.Before(u.ejectedUntil) && !u.trial
}

// An outcome is what an attempt says about its upstream.
type outcome int

const (
	succeeded outcome = iota
	failed
	unknown // the client went away first
)

// UpstreamHealth is what a Table knows of one upstream.
type UpstreamHealth struct {
	Route    string `json:"route"`    // the route's Name
	Upstream string `json:"upstream"` // the URL, as configured
	// Healthy is the verdict of the active health checks; true without
	// them.
	Healthy bool `json:"healthy"`
	// EjectedUntil is the end of the upstream's ejection, zero (and left
	// out of JSON) unless it is ejected. Once it has passed, the
	// upstream waits for the trial request that brings it back.
	EjectedUntil time.Time `json:"ejected_until,omitzero"`
}

// pick chooses the upstream of an attempt: for a request's first attempt
// (after < 0), the next available one in round robin; for a retry, the
// next available one after the upstream at index after. It returns nil
// if none is available. An ejected upstream whose time is up is picked
// for its trial, and no other attempt goes to it until the trial's
// outcome is recorded.
func (e *entry) pick(after int, now time.Time) (*upstream, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.upstreams)
	start := after + 1
	if after < 0 {
		start = e.next
	}
	for i := range n {
		k := (start + i) % n
		u := e.upstreams[k]
		if !u.available(now) {
			continue
		}
		if !u.ejectedUntil.IsZero() {
			u.trial = true
		}
		if after < 0 {
			e.next = (k + 1) % n
		}
		return u, k
	}
	return nil, -1
}

// record notes the outcome of an attempt on u: consecutive failures eject
// it; a success ends its ejection.
func (e *entry) record(u *upstream, o outcome, now time.Time) {
	e.mu.Lock()
	var ejected, back bool
	switch o {
	case succeeded:
		back = !u.ejectedUntil.IsZero()
		u.failures, u.ejectedUntil, u.trial = 0, time.Time{}, false
	case failed:
		u.failures++
		if e.eject.Failures > 0 && (u.trial || u.ejectedUntil.IsZero() && u.failures >= e.eject.Failures) {
			u.ejectedUntil, u.trial, ejected = now.Add(e.eject.Duration), false, true
		}
	case unknown:
		u.trial = false
	}
	failures, until := u.failures, u.ejectedUntil
	e.mu.Unlock()
	switch {
	case ejected:
		e.table.log.Warn("route: upstream ejected", "route", e.route.Name, "upstream", u.raw,
			"consecutive_failures", failures, "until", until)
	case back:
		e.table.log.Info("route: upstream back from ejection", "route", e.route.Name, "upstream", u.raw)
	}
}

// check notes the result of an active health check of u, and reports
// whether it changed u's health.
func (e *entry) check(u *upstream, ok bool) (changed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ok != u.down {
		u.streak = 0
		return false
	}
	u.streak++
	need := e.health.Unhealthy
	if u.down {
		need = e.health.Healthy
	}
	if u.streak < need {
		return false
	}
	u.down, u.streak = !u.down, 0
	return true
}
