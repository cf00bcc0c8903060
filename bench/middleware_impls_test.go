package bench

import (
	"context"
	"net/http"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/didip/tollbooth/v7"
	"github.com/go-chi/httprate"
	sethvargohttp "github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	ulule "github.com/ulule/limiter/v3"
	ululestdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
)

// mwLimit is one per-client limit of the HTTP middleware benchmarks, in
// the terms every middleware understands: N requests per Per, and room
// for N at once.
type mwLimit struct {
	N   int64
	Per time.Duration
}

var (
	// mwBenchLimit admits every request of BenchmarkMiddleware and
	// BenchmarkMiddlewareLoopback: no run makes 10⁸ requests in an hour,
	// even on one client address. It refills slowly enough (about 28 000
	// a second) that a client's remaining count, in the headers, shows
	// that its requests were counted.
	mwBenchLimit = mwLimit{N: 100_000_000, Per: time.Hour}

	// mwSmallLimit admits three requests per client an hour, for
	// TestMiddlewareImplementations.
	mwSmallLimit = mwLimit{N: 3, Per: time.Hour}
)

// mwImpl is one HTTP middleware under test. new returns the middleware
// limiting each client address (RemoteAddr) to l, and what releases its
// store.
type mwImpl struct {
	name string
	new  func(l mwLimit) (wrap func(http.Handler) http.Handler, close func(), err error)
	// remaining is the response header in which the middleware reports
	// the requests left to the client ("" for bare), so that a benchmark
	// can see that the limit was counted.
	remaining string
}

// mwBare is the baseline: the handler alone.
const mwBare = "bare"

var mwImpls = []mwImpl{
	{mwBare, newBare, ""},
	{"bouncer-httplimit", newBouncerHTTP, "X-RateLimit-Remaining"},
	{"httprate", newHTTPRate, "X-RateLimit-Remaining"},
	{"tollbooth", newTollbooth, "RateLimit-Remaining"},
	{"ulule-stdlib", newUluleStdlib, "X-RateLimit-Remaining"},
	{"sethvargo-httplimit", newSethvargoHTTP, "X-RateLimit-Remaining"},
}

func newBare(mwLimit) (func(http.Handler) http.Handler, func(), error) {
	return func(h http.Handler) http.Handler { return h }, func() {}, nil
}

// newBouncerHTTP is httplimit over memstore, both at their defaults, with
// one rule keyed by the client address (httplimit.IP(nil) trusts no
// proxy: the key is RemoteAddr's address).
func newBouncerHTTP(l mwLimit) (func(http.Handler) http.Handler, func(), error) {
	s := memstore.New(memstore.Options{})
	wrap, err := httplimit.Middleware(s, []httplimit.Rule{{
		Name: "per_ip",
		Key:  httplimit.IP(nil),
		Limits: []bouncer.Limit{
			{Name: "bench", Algorithm: bouncer.GCRA, Rate: l.N, Period: l.Per, Burst: l.N},
		},
	}}, httplimit.Options{})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return wrap, func() { _ = s.Close() }, nil
}

// newHTTPRate is httprate's sliding window counter keyed by RemoteAddr's
// address (LimitByIP), in its local counter.
func newHTTPRate(l mwLimit) (func(http.Handler) http.Handler, func(), error) {
	return httprate.LimitByIP(int(l.N), l.Per), func() {}, nil
}

// newTollbooth is tollbooth's token bucket (x/time/rate per key in an
// expirable cache). NewLimiter takes a rate per second and sets the burst
// to it; the burst is set to N so that N per Per means what it means for
// the others. The address is taken from RemoteAddr only: NewLimiter's
// default looks at X-Forwarded-For and X-Real-IP first, which no request
// here carries.
func newTollbooth(l mwLimit) (func(http.Handler) http.Handler, func(), error) {
	lmt := tollbooth.NewLimiter(float64(l.N)/l.Per.Seconds(), nil).
		SetBurst(int(l.N)).
		SetIPLookups([]string{"RemoteAddr"})
	return func(h http.Handler) http.Handler { return tollbooth.LimitHandler(lmt, h) }, func() {}, nil
}

// newUluleStdlib is ulule/limiter's net/http middleware over its memory
// store (fixed windows), keyed by its default KeyGetter, the client IP
// (TrustForwardHeader false: RemoteAddr).
func newUluleStdlib(l mwLimit) (func(http.Handler) http.Handler, func(), error) {
	lim := ulule.New(ululemem.NewStore(), ulule.Rate{Period: l.Per, Limit: l.N})
	return ululestdlib.NewMiddleware(lim).Handler, func() {}, nil
}

// newSethvargoHTTP is sethvargo/go-limiter's httplimit over memorystore
// (tokens per interval), keyed by IPKeyFunc() (no headers: RemoteAddr).
func newSethvargoHTTP(l mwLimit) (func(http.Handler) http.Handler, func(), error) {
	s, err := memorystore.New(&memorystore.Config{Tokens: uint64(l.N), Interval: l.Per})
	if err != nil {
		return nil, nil, err
	}
	m, err := sethvargohttp.NewMiddleware(s, sethvargohttp.IPKeyFunc())
	if err != nil {
		return nil, nil, err
	}
	return m.Handle, func() { _ = s.Close(context.Background()) }, nil
}
