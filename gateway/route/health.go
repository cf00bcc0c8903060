package route

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"
)

// watch checks u every Interval until ctx is done, the first time at
// once.
func (e *entry) watch(ctx context.Context, u *upstream) {
	ref, _ := url.ParseRequestURI(e.health.Path) // validated
	target := *u.url
	target.Path, target.RawPath = u.url.Path+ref.Path, ""
	target.RawQuery = ref.RawQuery
	address := target.String()

	tick := time.NewTicker(e.health.Interval)
	defer tick.Stop()
	for {
		ok := e.probe(ctx, u, address)
		if ctx.Err() != nil {
			return
		}
		if e.check(u, ok) {
			if ok {
				e.table.log.Info("route: upstream healthy", "route", e.route.Name, "upstream", u.raw)
			} else {
				e.table.log.Warn("route: upstream unhealthy", "route", e.route.Name, "upstream", u.raw,
					"consecutive_failures", e.health.Unhealthy)
			}
			if e.table.onUpstream != nil {
				e.table.onUpstream(e.route.Name, u.raw, ok)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probe makes one health check: a GET answered 200-399 within the
// check's Timeout.
func (e *entry) probe(ctx context.Context, u *upstream, address string) bool {
	ctx, cancel := context.WithTimeout(ctx, e.health.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return false
	}
	req.Header.Set("User-Agent", "bouncer-gateway-health-check")
	resp, err := u.transport.RoundTrip(req)
	if err != nil {
		return false
	}
	io.CopyN(io.Discard, resp.Body, drainLimit)
	resp.Body.Close()
	return 200 <= resp.StatusCode && resp.StatusCode < 400
}
