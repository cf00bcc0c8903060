package rules

import (
	"context"
	"strings"
	"sync"
)

// MaxLoggedDomains bounds the unknown domains an Engine logs: clients
// choose domains, and one line each would let them fill the log.
const MaxLoggedDomains = 100

// unknownDomains remembers the unknown domains an engine has logged.
type unknownDomains struct {
	mu     sync.Mutex
	logged map[string]bool
	full   bool // the summary line is written: no more are logged
}

// unknownDomain logs a request for name, a domain the config does not
// define, the first time it is seen, up to MaxLoggedDomains domains.
func (e *Engine) unknownDomain(ctx context.Context, name string) {
	u := &e.unknown
	u.mu.Lock()
	if u.full || u.logged[name] {
		u.mu.Unlock()
		return
	}
	if len(u.logged) == MaxLoggedDomains {
		u.full = true
		u.mu.Unlock()
		e.logger().WarnContext(ctx, "more unknown domains requested; no more are logged (see bouncer_unknown_domain_requests_total)",
			"logged", MaxLoggedDomains)
		return
	}
	if u.logged == nil {
		u.logged = map[string]bool{}
	}
	u.logged[name] = true
	u.mu.Unlock()
	answer := "answered OK with no limit"
	if e.RejectUnknownDomains {
		answer = "rejected"
	}
	attrs := []any{"domain", name, "answer", answer}
	for _, d := range e.Config().Domains() {
		if strings.EqualFold(d.Name, name) {
			attrs = append(attrs, "did_you_mean", d.Name) // domains are case-sensitive
			break
		}
	}
	e.logger().WarnContext(ctx, "request for a domain the config does not define (logged once per domain)", attrs...)
}
