package route

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"slices"
	"sync"
	"time"
)

// Options configure a Table. The zero value is ready to use, with the
// defaults stated on each field.
type Options struct {
	// Logger receives a line when an upstream is ejected or comes back,
	// and when its health changes; never one per request (the gateway
	// logs access). Nil means slog.Default().
	Logger *slog.Logger

	// Transport carries every exchange with the upstreams, health checks
	// included. Nil means two transports made by New and closed by Close:
	// for http and https, a clone of http.DefaultTransport that uses no
	// proxy, leaves compression to the client and the upstream, and keeps
	// up to 64 idle connections per upstream; for h2c, the same speaking
	// only HTTP/2 without TLS. A Transport set here receives h2c
	// upstreams' requests as http:// URLs, so it must speak cleartext
	// HTTP/2 to them if there are any.
	Transport http.RoundTripper

	// Now tells the time for the ejection windows. Nil means time.Now.
	Now func() time.Time

	// RequestIDHeader names the request ID header. A valid ID the client
	// sent (1 to 128 printable ASCII characters) is kept; otherwise a new
	// one, 16 random bytes in hex, replaces it. The ID is set on the
	// request sent upstream and on the response, errors included. Empty
	// means "X-Request-Id".
	RequestIDHeader string

	// OnUpstream, if not nil, is called when an active health check
	// changes an upstream's health, with the route's Name, the
	// upstream's URL as configured and the new health; for metrics. It is
	// called from the checking goroutine, one call at a time per
	// upstream, and should return quickly. Ejections do not call it:
	// Health reports them.
	OnUpstream func(route, upstream string, healthy bool)
}

// A Table holds routes and finds the one a request belongs to. It is
// safe for concurrent use. Close stops its health checks.
type Table struct {
	entries    []*entry // in the order Lookup tries them
	ordered    []*entry // in the order of the routes given to New
	log        *slog.Logger
	now        func() time.Time
	idHeader   string
	onUpstream func(route, upstream string, healthy bool)
	owned      []*http.Transport

	stop      context.CancelFunc
	checkers  sync.WaitGroup
	closeOnce sync.Once
}

// entry is a route in a Table.
type entry struct {
	table     *Table
	route     Route // the caller's, copied
	matcher   matcher
	target    Target
	timeout   time.Duration
	health    HealthCheck // with defaults; used if route.Health != nil
	eject     Eject       // with defaults
	plain     *httputil.ReverseProxy
	stream    *httputil.ReverseProxy // for gRPC: flushes every write
	upstreams []*upstream

	mu   sync.Mutex // guards next and the upstreams' state
	next int        // round robin: where the next request's search starts
}

// New validates routes and returns a Table serving them, with the health
// checks of the routes that have them running. Its error names every
// route and field at fault. The routes are copied: changing them later
// changes nothing.
func New(routes []Route, o Options) (*Table, error) {
	if err := validate(routes); err != nil {
		return nil, err
	}
	if o.RequestIDHeader != "" && !isToken(o.RequestIDHeader) {
		return nil, fmt.Errorf("route: Options.RequestIDHeader %q is not a header name", o.RequestIDHeader)
	}
	t := &Table{
		log:        o.Logger,
		now:        o.Now,
		idHeader:   textproto.CanonicalMIMEHeaderKey(o.RequestIDHeader),
		onUpstream: o.OnUpstream,
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	if t.now == nil {
		t.now = time.Now
	}
	if t.idHeader == "" {
		t.idHeader = "X-Request-Id"
	}
	var plain, h2c http.RoundTripper = o.Transport, o.Transport
	for i, r := range routes {
		e := &entry{
			table:   t,
			route:   r,
			matcher: newMatcher(&r),
			timeout: r.Timeout,
			eject:   r.Eject.withDefaults(),
		}
		e.route.Upstreams = slices.Clone(r.Upstreams)
		if r.Health != nil {
			h := *r.Health
			e.route.Health = &h
			e.health = h.withDefaults()
		}
		if e.timeout == 0 {
			e.timeout = defaultTimeout
		}
		e.target = Target{Route: &e.route, Index: i, entry: e}
		for _, s := range r.Upstreams {
			u, isH2C, _ := parseUpstream(s) // validated
			up := &upstream{raw: s, url: u}
			switch {
			case isH2C && h2c == nil:
				h2c = t.own(newTransport(true))
			case !isH2C && plain == nil:
				plain = t.own(newTransport(false))
			}
			up.transport = plain
			if isH2C {
				up.transport = h2c
			}
			e.upstreams = append(e.upstreams, up)
		}
		e.plain = e.proxy(0)
		e.stream = e.proxy(-1)
		t.entries = append(t.entries, e)
	}
	t.ordered = slices.Clone(t.entries)
	slices.SortStableFunc(t.entries, func(a, b *entry) int { return compareMatchers(a.matcher, b.matcher) })

	ctx, stop := context.WithCancel(context.Background())
	t.stop = stop
	for _, e := range t.entries {
		if e.route.Health == nil {
			continue
		}
		for _, u := range e.upstreams {
			t.checkers.Go(func() { e.watch(ctx, u) })
		}
	}
	return t, nil
}

// proxy makes one of the route's reverse proxies.
func (e *entry) proxy(flush time.Duration) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        e.rewrite,
		Transport:      e,
		FlushInterval:  flush,
		ModifyResponse: e.modifyResponse,
		ErrorHandler:   e.fail,
		BufferPool:     buffers,
		// Its lines would be per request; the failures it reports reach
		// the client, and the gateway's access log, as statuses.
		ErrorLog: log.New(io.Discard, "", 0),
	}
}

func (t *Table) own(tr *http.Transport) *http.Transport {
	t.owned = append(t.owned, tr)
	return tr
}

// buffers lend the reverse proxies the buffers they copy response bodies
// through, which they would otherwise allocate, 32 KiB a request.
var buffers = &bufferPool{}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// newTransport makes a transport for upstreams: a clone of
// http.DefaultTransport (or of its settings, if it was replaced), tuned
// for a proxy, and with h2c speaking only cleartext HTTP/2.
func newTransport(h2c bool) *http.Transport {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		base = &http.Transport{
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	tr := base.Clone()
	tr.Proxy = nil               // upstreams are reached directly, whatever HTTP_PROXY says
	tr.DisableCompression = true // pass through what the client asked for
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 64
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return tr
}

// Lookup returns the target of the route a request of View v belongs to,
// or nil if none matches. Routes whose Host matches v.Host are tried, an
// exact host before a wildcard (the longest first) before "", and within
// each the longest PathPrefix matching v.Path wins. Lookup does not
// allocate.
func (t *Table) Lookup(v *View) *Target {
	if v.Path == "" {
		return nil // CONNECT, OPTIONS *
	}
	for _, e := range t.entries {
		if e.matcher.matches(v.Host, v.Path) {
			return &e.target
		}
	}
	return nil
}

// Health returns the health of every upstream of every route, in the
// order of the routes given to New and of their Upstreams.
func (t *Table) Health() []UpstreamHealth {
	var hs []UpstreamHealth
	for _, e := range t.ordered {
		e.mu.Lock()
		for _, u := range e.upstreams {
			hs = append(hs, UpstreamHealth{Route: e.route.Name, Upstream: u.raw, Healthy: !u.down, EjectedUntil: u.ejectedUntil})
		}
		e.mu.Unlock()
	}
	return hs
}

// Close stops the health checks and waits for them to end, then closes
// the idle connections of the transports New made. Requests still in
// flight are not interrupted. Close may be called more than once.
func (t *Table) Close() {
	t.closeOnce.Do(func() {
		t.stop()
		t.checkers.Wait()
		for _, tr := range t.owned {
			tr.CloseIdleConnections()
		}
	})
}
