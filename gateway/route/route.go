package route

import "time"

// Route sends the requests that match its Host and PathPrefix to its
// Upstreams. Zero durations and counts mean the defaults stated on each
// field. Its yaml tags are its names in `bouncer gateway`'s config file,
// which holds it as is.
type Route struct {
	// Name identifies the route in logs, metrics and error messages. It
	// is required and unique within a Table.
	Name string `yaml:"name"`

	// Host is the request host the route serves, compared
	// case-insensitively and without the request's port: "" matches any
	// host, "api.example.com" that host only, and "*.example.com" every
	// host under example.com, at any depth, but not example.com itself.
	Host string `yaml:"host"`

	// PathPrefix is the start of the paths the route serves. It is
	// required, starts with "/" and is canonical (no "." or ".."
	// segments, no "//", percent-encoded as View.Path is). It matches
	// whole segments: "/api" matches /api, /api/ and /api/v1 but not
	// /apiary; "/api/" matches /api/ and /api/v1 but not /api. Requests
	// are matched on their View's canonical path, which is also the path
	// sent upstream, so that a prefix cannot be escaped with
	// "/api/../admin".
	PathPrefix string `yaml:"path_prefix"`

	// StripPrefix removes PathPrefix from the path sent upstream, keeping
	// a leading "/": with PathPrefix "/api", /api/v1 is sent as /v1 and
	// /api as /.
	StripPrefix bool `yaml:"strip_prefix"`

	// Upstreams are the servers the route balances over, round robin, as
	// URLs: http://host:port and https://host:port for HTTP/1.1 (and
	// HTTP/2 negotiated over TLS), h2c://host:port for HTTP/2 without TLS
	// (gRPC servers). A path in the URL is a base, prefixed to the path
	// sent: http://10.0.0.1:8080/v2 receives /api/x as /v2/api/x. Query,
	// fragment and user info are refused. At least one is required.
	Upstreams []string `yaml:"upstreams"`

	// Timeout bounds one attempt's whole exchange with an upstream, from
	// sending the request to the end of the response body. Zero means
	// 30s. For WebSocket (and other) upgrades and for gRPC, it bounds the
	// exchange only until the response headers: the tunnel and the
	// stream then last as long as the client and the upstream keep them
	// (a gRPC client states its own deadline, grpc-timeout, which the
	// upstream enforces).
	Timeout time.Duration `yaml:"timeout"`

	// Retries is how many more attempts an idempotent request gets, each
	// on the next available upstream after the one that failed, when an
	// attempt fails with a connection error or a 502, 503 or 504 answer.
	// Idempotent are GET, HEAD, OPTIONS, TRACE, PUT and DELETE, and any
	// request with an Idempotency-Key header; the request body must be
	// empty, or replayable with Request.GetBody (which a server's
	// requests do not have unless a middleware buffered the body and set
	// it). Timeouts are not retried. The last failure is what the client
	// gets. Zero means no retries.
	Retries int `yaml:"retries"`

	// Health, if not nil, turns on active health checks of every
	// upstream. Nil means none: every upstream counts as healthy, and
	// only Eject takes one out.
	Health *HealthCheck `yaml:"health_check"`

	// Eject takes out of rotation an upstream that fails consecutive
	// requests (passive health checking). Its zero value has the defaults
	// stated on its fields.
	Eject Eject `yaml:"-"`
}

// HealthCheck configures the active health checks of a Route's
// upstreams: a GET of Path on each upstream every Interval. An answer
// 200-399 within Timeout is a success; any other answer or an error is a
// failure. Redirects are not followed. Upstreams start healthy.
type HealthCheck struct {
	// Path is the path checked, starting with "/", below the upstream's
	// base path. It is required.
	Path string `yaml:"path"`

	// Interval is the time between the starts of two checks of one
	// upstream. Zero means 5s.
	Interval time.Duration `yaml:"interval"`

	// Timeout bounds one check. Zero means 2s.
	Timeout time.Duration `yaml:"timeout"`

	// Healthy is how many consecutive successes make an unhealthy
	// upstream healthy again. Zero means 2.
	Healthy int `yaml:"healthy"`

	// Unhealthy is how many consecutive failures make a healthy upstream
	// unhealthy. Zero means 3.
	Unhealthy int `yaml:"unhealthy"`
}

// Eject configures passive ejection: an upstream whose attempts fail
// Failures times in a row, by a connection error, a timeout or a 5xx
// answer, gets no traffic for Duration; then one request is let through
// as a trial, and its success brings the upstream back while its
// failure ejects it for Duration again. A client that goes away counts
// neither way.
type Eject struct {
	// Failures is how many consecutive failures eject an upstream. Zero
	// means 5; a negative value turns ejection off.
	Failures int

	// Duration is how long an ejected upstream gets no traffic. Zero
	// means 30s.
	Duration time.Duration
}

// Defaults of the zero values.
const (
	defaultTimeout       = 30 * time.Second
	defaultInterval      = 5 * time.Second
	defaultCheckTimeout  = 2 * time.Second
	defaultHealthy       = 2
	defaultUnhealthy     = 3
	defaultEjectFailures = 5
	defaultEjectDuration = 30 * time.Second
)

// withDefaults returns h with its zero fields set to their defaults.
func (h HealthCheck) withDefaults() HealthCheck {
	if h.Interval == 0 {
		h.Interval = defaultInterval
	}
	if h.Timeout == 0 {
		h.Timeout = defaultCheckTimeout
	}
	if h.Healthy == 0 {
		h.Healthy = defaultHealthy
	}
	if h.Unhealthy == 0 {
		h.Unhealthy = defaultUnhealthy
	}
	return h
}

// withDefaults returns e with its zero fields set to their defaults.
func (e Eject) withDefaults() Eject {
	if e.Failures == 0 {
		e.Failures = defaultEjectFailures
	}
	if e.Duration == 0 {
		e.Duration = defaultEjectDuration
	}
	return e
}
