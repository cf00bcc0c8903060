package httpretry

import (
	"net/http"
	"sync"
	"time"

	"github.com/bouncerhq/bouncer/header"
)

// The pacer's memory is bounded: beyond maxHosts hosts, or maxQuotas
// quotas of one host, the least recently updated one is forgotten.
const (
	maxHosts  = 1024
	maxQuotas = 16
)

// pacer remembers, per host, what the server said of its quotas. Its
// zero value is empty and ready.
type pacer struct {
	mu    sync.Mutex
	hosts map[string]*hostState
}

type hostState struct {
	updated time.Time
	until   time.Time // a 429 or 503 asked the host's clients to wait until then
	quotas  map[quotaKey]*quota
}

// quotaKey names a quota of a host: a RateLimit item's policy and
// partition key, or the X-RateLimit-* fields (legacy).
type quotaKey struct {
	legacy          bool
	name, partition string
}

type quota struct {
	updated   time.Time
	remaining int64
	reset     time.Time
	// limit and window are the policy's quota and window, if the server
	// announced them, so that the quota can start over at its reset.
	limit  int64
	window time.Duration
}

// take returns how long a request to host must wait for the spent quotas
// of the host to reset; if it need not wait, it counts the request
// against the host's other quotas.
func (p *pacer) take(host string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hosts[host]
	if h == nil {
		return 0
	}
	until := h.until
	for _, q := range h.quotas {
		q.roll(now)
		if q.remaining <= 0 && q.reset.After(until) {
			until = q.reset
		}
	}
	if until.After(now) {
		return until.Sub(now)
	}
	for _, q := range h.quotas {
		if q.reset.After(now) {
			q.remaining--
		}
	}
	return 0
}

// roll starts the quota over at its reset, for as many windows as have
// passed, if its policy is known.
func (q *quota) roll(now time.Time) {
	if now.Before(q.reset) || q.limit <= 0 || q.window <= 0 {
		return
	}
	q.reset = q.reset.Add((now.Sub(q.reset)/q.window + 1) * q.window)
	q.remaining = q.limit
}

// observe records what an answer from host says of its quotas. told says
// whether it asked its client to wait until until (a 429 or 503 with a
// wait).
func (p *pacer) observe(host string, h http.Header, told bool, until, now time.Time) {
	items := header.ParseRateLimit(h.Values("RateLimit"))
	var legacy header.Legacy
	hasLegacy := false
	if len(items) == 0 {
		legacy, hasLegacy = header.ParseLegacy(h)
	}
	if !told && len(items) == 0 && !hasLegacy {
		return
	}
	var policies []header.Policy
	if len(items) > 0 {
		policies = header.ParsePolicies(h.Values("RateLimit-Policy"))
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.host(host, now)
	if told && until.After(s.until) {
		s.until = until
	}
	for _, it := range items {
		if !it.HasRemaining {
			continue
		}
		q := quota{updated: now, remaining: it.Remaining}
		partition := it.PartitionKey
		for _, pol := range policies {
			if pol.Name == it.Name && (partition == nil || pol.PartitionKey == nil || string(pol.PartitionKey) == string(partition)) {
				q.limit, q.window = pol.Quota, pol.Window
				if partition == nil {
					partition = pol.PartitionKey
				}
				break
			}
		}
		switch {
		case it.HasReset:
			q.reset = now.Add(it.Reset)
		case q.window > 0:
			q.reset = now.Add(q.window) // the latest the reset can be
		default:
			continue // no reset to wait for
		}
		s.set(quotaKey{name: it.Name, partition: string(partition)}, q, now)
	}
	if hasLegacy {
		s.set(quotaKey{legacy: true}, quota{updated: now, remaining: legacy.Remaining, reset: now.Add(legacy.Reset)}, now)
	}
}

// host returns the state of host, made if new, marked updated at now.
func (p *pacer) host(host string, now time.Time) *hostState {
	s := p.hosts[host]
	if s == nil {
		if p.hosts == nil {
			p.hosts = make(map[string]*hostState)
		}
		if len(p.hosts) >= maxHosts {
			delete(p.hosts, oldest(p.hosts, func(s *hostState) time.Time { return s.updated }))
		}
		s = &hostState{quotas: make(map[quotaKey]*quota)}
		p.hosts[host] = s
	}
	s.updated = now
	return s
}

// set records what an answer at now says of quota k. Within a window the
// pacer holds to be still on, an answer can lower the count but not raise
// it, and can put the reset off but not bring it nearer: answers to the
// requests in flight arrive in any order, the count has already gone down
// for every request sent, and each request may put off the time the quota
// is full again (a bucket's t grows with what it holds spent).
func (s *hostState) set(k quotaKey, q quota, now time.Time) {
	old, ok := s.quotas[k]
	switch {
	case ok && now.Before(old.reset):
		q.remaining = min(q.remaining, old.remaining)
		q.reset = maxTime(q.reset, old.reset)
	case !ok && len(s.quotas) >= maxQuotas:
		delete(s.quotas, oldest(s.quotas, func(q *quota) time.Time { return q.updated }))
	}
	s.quotas[k] = &q
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// oldest returns the key of m whose value was least recently updated.
func oldest[K comparable, V any](m map[K]V, updated func(V) time.Time) K {
	var key K
	var at time.Time
	first := true
	for k, v := range m {
		if u := updated(v); first || u.Before(at) {
			key, at, first = k, u, false
		}
	}
	return key
}
