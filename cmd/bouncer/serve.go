package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/jsonapi"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/metrics"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/rls"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/tracing"
)

// serveConfig is everything `bouncer serve` takes from flags and the
// environment (BOUNCER_<FLAG>, with '-' as '_'); a flag wins over its
// variable.
type serveConfig struct {
	config          string
	grpcAddr        string
	httpAddr        string
	adminAddr       string
	store           string
	storeTimeout    time.Duration
	onStoreError    string
	headers         string
	unknownDomain   string
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
	adminKeys       int
	watch           bool
	respMetadata    bool
	otelEndpoint    string
	otelInsecure    bool
	otelSample      float64

	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	maxHeaderBytes    int

	envErrs []string // environment variables whose values did not parse
}

func serveFlags(c *serveConfig, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { serveUsage(fs.Output()) }
	fs.StringVar(&c.config, "config", "", "config file, or directory of *.yaml and *.yml files (Bouncer's or envoyproxy/ratelimit's format); required")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "127.0.0.1:8081", "Envoy RLS v3 gRPC listener")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:8080", "JSON API listener (POST /v1/check); empty to disable")
	fs.StringVar(&c.adminAddr, "admin-addr", "127.0.0.1:6070", "admin listener (health, metrics, pprof, rules); empty to disable")
	fs.StringVar(&c.store, "store", "memory", "memory, or redis://[[user]:password@]host:port[,host:port...] (several addresses: a Cluster)")
	fs.DurationVar(&c.storeTimeout, "store-timeout", redisstore.DefaultTimeout, "deadline of every Redis call; a check whose reply has not come by then decides by policy")
	fs.StringVar(&c.onStoreError, "on-store-error", "local", "when Redis cannot answer, for rules that say nothing: local (each instance limits on its own), allow or deny")
	fs.StringVar(&c.headers, "headers", "all", "rate-limit headers to return: all, ietf, x-ratelimit or off")
	fs.StringVar(&c.unknownDomain, "unknown-domain", "allow", "requests for a domain no config defines: allow (no limits, as envoyproxy/ratelimit) or error (NOT_FOUND / 404)")
	fs.BoolVar(&c.respMetadata, "response-metadata", false, "gRPC answers carry dynamic metadata: the request's domain, descriptors and hits, and the config metadata of the descriptors that passed (envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for in-flight calls")
	fs.StringVar(&c.otelEndpoint, "otel-endpoint", "", "OpenTelemetry: send traces over OTLP/gRPC to this collector (host:port); empty: tracing off")
	fs.BoolVar(&c.otelInsecure, "otel-insecure", false, "OpenTelemetry: send traces without TLS (a collector on the same host or pod)")
	fs.Float64Var(&c.otelSample, "otel-sample-ratio", 1, "OpenTelemetry: share of traces started here that are kept (calls whose caller sampled them always are)")
	fs.BoolVar(&c.watch, "watch", true, "reload the config when its files change (SIGHUP reloads it either way)")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", 5*time.Second, "HTTP listeners: how long a client may take to send a request's headers (gRPC: to finish its connection handshake)")
	fs.DurationVar(&c.readTimeout, "read-timeout", 10*time.Second, "HTTP listeners: how long a client may take to send a whole request, body included")
	fs.DurationVar(&c.writeTimeout, "write-timeout", time.Minute, "HTTP listeners: how long an answer may take to write, from the end of the request's headers (admin pprof profiles must fit in it)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 2*time.Minute, "HTTP listeners: how long a keep-alive connection may wait for its next request")
	fs.IntVar(&c.maxHeaderBytes, "max-header-bytes", 64<<10, "HTTP and gRPC listeners: the most bytes of request headers a client may send")
	fs.IntVar(&c.adminKeys, "admin-keys", 10000, "how many recently decided keys the admin API can list (/v1/keys); 0 turns the index off")
	fs.VisitAll(func(f *flag.Flag) {
		env := "BOUNCER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		f.Usage += " (env " + env + ")"
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				c.envErrs = append(c.envErrs, fmt.Sprintf("%s=%q: %v", env, v, err))
			}
		}
	})
	return fs
}

func serveUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: bouncer serve --config PATH [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Serves the rate limit service: Envoy's RLS v3 over gRPC, POST /v1/check over HTTP,")
	fmt.Fprintln(w, "and the admin API. Reloads the config on change and on SIGHUP; drains and stops on")
	fmt.Fprintln(w, "SIGTERM or SIGINT.")
	fmt.Fprintln(w)
	var c serveConfig
	printFlags(w, serveFlags(&c, w))
}

func runServe(args []string, stdout, stderr io.Writer) int {
	var c serveConfig
	opts, ok := parseServeFlags("serve", serveFlags(&c, stderr), &c, args, stderr)
	if !ok {
		return exitUsage
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		// The service's heap is small (tens of MB) and churns with every
		// call: collecting at 5× the live heap instead of 2× halves the
		// collector's CPU for a few MB more. GOGC overrides it.
		debug.SetGCPercent(400)
	}
	log := newLogger(stderr, c.logFormat, opts.level)
	return untilSignal(log, func(ctx context.Context) (reload, shutdown func(), err error) {
		s, err := startService(ctx, c, opts, log)
		if err != nil {
			return nil, nil, err
		}
		return func() { _ = s.reloader.Reload() }, s.shutdown, nil
	})
}

// parseServeFlags parses args into c with fs (serve's flags or the
// gateway's) and validates them; it reports false, having said why on
// stderr, when the command should exit with a usage error.
func parseServeFlags(name string, fs *flag.FlagSet, c *serveConfig, args []string, stderr io.Writer) (serveOptions, bool) {
	if err := fs.Parse(args); err != nil {
		return serveOptions{}, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bouncer %s: unexpected argument %q\n", name, fs.Arg(0))
		return serveOptions{}, false
	}
	opts, err := c.validate()
	if err != nil {
		fmt.Fprintf(stderr, "bouncer %s: %v\n", name, err)
		return serveOptions{}, false
	}
	return opts, true
}

// untilSignal starts a command's service with start, reloads it on
// SIGHUP, and shuts it down (draining what is in flight) on SIGTERM or
// SIGINT; it returns the command's exit code.
func untilSignal(log *slog.Logger, start func(ctx context.Context) (reload, shutdown func(), err error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	reload, shutdown, err := start(ctx)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitFail
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			log.Info("SIGHUP: reloading the config")
			reload()
		}
	}()
	<-ctx.Done()
	stop()
	log.Info("shutting down: draining what is in flight")
	shutdown()
	log.Info("stopped")
	return exitOK
}

// serveOptions are the parsed forms of serveConfig's strings.
type serveOptions struct {
	level         slog.Level
	headers       header.Mode
	policy        bouncer.StoreErrorPolicy
	rejectUnknown bool
	redisAddrs    []string
	redisUser     string
	redisPassword string
}

func (c serveConfig) validate() (serveOptions, error) {
	var o serveOptions
	if len(c.envErrs) > 0 {
		return o, errors.New(strings.Join(c.envErrs, "; "))
	}
	if c.config == "" {
		return o, errors.New("--config is required: a config file or a directory of them")
	}
	if err := o.level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return o, fmt.Errorf("--log-level: want debug, info, warn or error, got %q", c.logLevel)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return o, fmt.Errorf("--log-format: want text or json, got %q", c.logFormat)
	}
	var ok bool
	if o.headers, ok = header.ParseMode(c.headers); !ok {
		return o, fmt.Errorf("--headers: want all, ietf, x-ratelimit or off, got %q", c.headers)
	}
	p, err := bouncer.ParseStoreErrorPolicy(c.onStoreError)
	if err != nil || p == bouncer.StoreErrorDefault {
		return o, fmt.Errorf("--on-store-error: want allow, deny or local, got %q", c.onStoreError)
	}
	o.policy = p
	switch c.unknownDomain {
	case "allow":
	case "error":
		o.rejectUnknown = true
	default:
		return o, fmt.Errorf("--unknown-domain: want allow or error, got %q", c.unknownDomain)
	}
	if c.storeTimeout <= 0 {
		return o, fmt.Errorf("--store-timeout: want a positive duration, got %v", c.storeTimeout)
	}
	if c.otelSample < 0 || c.otelSample > 1 {
		return o, fmt.Errorf("--otel-sample-ratio: want 0 to 1, got %v", c.otelSample)
	}
	if c.adminKeys < 0 {
		return o, fmt.Errorf("--admin-keys: want 0 or more, got %d", c.adminKeys)
	}
	if c.shutdownTimeout <= 0 {
		return o, fmt.Errorf("--shutdown-timeout: want a positive duration, got %v", c.shutdownTimeout)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"read-header-timeout", c.readHeaderTimeout}, {"read-timeout", c.readTimeout}, {"write-timeout", c.writeTimeout}, {"idle-timeout", c.idleTimeout}} {
		if d.v <= 0 {
			return o, fmt.Errorf("--%s: want a positive duration, got %v", d.flag, d.v)
		}
	}
	if c.maxHeaderBytes < 1024 {
		return o, fmt.Errorf("--max-header-bytes: want at least 1024, got %d", c.maxHeaderBytes)
	}
	if c.grpcAddr == "" {
		return o, errors.New("--grpc-addr: required")
	}
	if c.store != "memory" {
		u, err := url.Parse(c.store)
		if err != nil || u.Scheme != "redis" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return o, fmt.Errorf("--store: want memory or redis://host:port[,host:port...], got %q", redactURL(c.store))
		}
		o.redisAddrs = strings.Split(u.Host, ",")
		if u.User != nil {
			o.redisUser = u.User.Username()
			o.redisPassword, _ = u.User.Password()
		}
	}
	return o, nil
}

// redactURL hides a password in a store URL before it is printed.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
		return u.String()
	}
	return s
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	ho := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// service is a running `bouncer serve`: its listeners, engine and store.
type service struct {
	log      *slog.Logger
	engine   *rules.Engine
	reloader *rules.Reloader
	store    io.Closer

	grpc       *grpc.Server
	health     *health.Server
	httpSrv    *http.Server
	adminSrv   *http.Server
	grpcAddr   string
	httpAddr   string
	adminAddr  string
	draining   atomic.Bool
	watchStop  context.CancelFunc
	wg         sync.WaitGroup
	shutdownIn time.Duration

	stopTracing func(context.Context) error // nil when tracing is off
}

// startService loads the config, opens the store and the listeners, and
// starts serving; ctx ends the config watch.
// redisStreamWorkers is how many gRPC stream workers serve with a Redis
// store: as many calls as are commonly in flight at once, each waiting
// for its round trip (see startService).
const redisStreamWorkers = 256

func startService(ctx context.Context, c serveConfig, o serveOptions, log *slog.Logger) (*service, error) {
	cfg, err := rules.Load(c.config)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	metrics.RegisterBuildInfo(reg)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	m.Serving(cfg)

	st, err := openStore(c, o, log, reg)
	if err != nil {
		return nil, err
	}
	lim, closer, degraded := st.lim, st.closer, st.degraded
	var stopTracing func(context.Context) error
	if c.otelEndpoint != "" {
		stop, err := tracing.Start(ctx, tracing.Options{Endpoint: c.otelEndpoint, Insecure: c.otelInsecure, SampleRatio: c.otelSample})
		if err != nil {
			closer.Close()
			return nil, err
		}
		stopTracing, lim = stop, tracing.Limiter(lim)
	}
	e := rules.NewEngine(cfg, m.Limiter(lim))
	if c.adminKeys > 0 {
		e.Keys = rules.NewKeyIndex(c.adminKeys)
	}
	e.Concurrent = o.redisAddrs != nil // a request's descriptors wait for one round trip, not one each
	e.RejectUnknownDomains = o.rejectUnknown
	e.Observe = m.Observe
	e.Logger = log
	s := &service{log: log, engine: e, store: closer, shutdownIn: c.shutdownTimeout, stopTracing: stopTracing}
	s.reloader = &rules.Reloader{Path: c.config, Engine: e, OnReload: m.Reloaded,
		OnResult: func(res rules.ReloadResult) {
			attrs := []any{"version", res.Config.Version}
			switch res.Outcome {
			case rules.Rejected, rules.WatchFailed:
				// One attribute per problem, each with its file and line.
				for i, p := range res.Problems {
					attrs = append(attrs, fmt.Sprintf("problem.%d", i+1), p.String())
				}
				log.Error(res.Outcome.String(), attrs...)
			default: // reloaded, unchanged (a SIGHUP with nothing new), fixed back
				log.Info(res.Outcome.String(), attrs...)
			}
		}}

	listeners, err := listen(c.grpcAddr, c.httpAddr, c.adminAddr)
	if err != nil {
		closer.Close()
		return nil, err
	}
	// Stream workers reuse goroutines (and their grown stacks) across
	// calls instead of starting one per call. A call that finds every
	// worker busy gets a goroutine of its own, which grows its stack
	// again: with the memory store a call never waits, so one worker per
	// CPU keeps up; with Redis each call waits a round trip, so as many
	// workers as calls are commonly in flight.
	workers := uint32(runtime.GOMAXPROCS(0))
	if o.redisAddrs != nil {
		workers = max(workers, redisStreamWorkers)
	}
	s.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(1<<20), grpc.NumStreamWorkers(workers),
		grpc.ConnectionTimeout(c.readHeaderTimeout), grpc.MaxHeaderListSize(uint32(c.maxHeaderBytes)))
	rlsServer := rls.New(e, o.headers)
	rlsServer.DynamicMetadata = c.respMetadata
	jsonHandler := &jsonapi.Handler{Engine: e, Headers: o.headers}
	if stopTracing != nil {
		rlsServer.Tracer = otel.Tracer(rls.TracerName)
		jsonHandler.Tracer = otel.Tracer(jsonapi.TracerName)
	}
	rlsServer.Register(s.grpc)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.grpcAddr = listeners[0].Addr().String()
	s.serve(func() error { return s.grpc.Serve(listeners[0]) })
	if l := listeners[1]; l != nil {
		mux := http.NewServeMux()
		mux.Handle("/v1/check", jsonHandler)
		s.httpSrv = c.httpServer(mux)
		s.httpAddr = l.Addr().String()
		s.serve(func() error { return s.httpSrv.Serve(l) })
	}
	if l := listeners[2]; l != nil {
		h := admin.Handler(admin.Options{Engine: e, Gatherer: reg, Ready: func() bool { return !s.draining.Load() }, Degraded: degraded, Reloads: s.reloader.History})
		s.adminSrv = c.httpServer(h)
		s.adminAddr = l.Addr().String()
		s.serve(func() error { return s.adminSrv.Serve(l) })
	}
	watchCtx, cancel := context.WithCancel(ctx)
	s.watchStop = cancel
	if c.watch {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.reloader.Watch(watchCtx); err != nil {
				log.Warn("not watching the config for changes; reload with SIGHUP", "err", err)
			}
		}()
	}
	log.Info("serving", "grpc", s.grpcAddr, "http", s.httpAddr, "admin", s.adminAddr,
		"store", redactURL(c.store), "config", c.config, "version", cfg.Version)
	return s, nil
}

// store is the limiter a command counts in, and what it can tell of it.
type store struct {
	lim      bouncer.Limiter
	closer   io.Closer
	degraded func() []string // why decisions are made without the store now; nil: never
}

// openStore opens the store of --store: memory, or Redis, whose
// collector it registers with reg. A Redis store starts whether or not
// Redis answers, and connects in the background; meanwhile checks decide
// by policy.
func openStore(c serveConfig, o serveOptions, log *slog.Logger, reg prometheus.Registerer) (store, error) {
	if o.redisAddrs == nil {
		ms := memstore.New(memstore.Options{})
		return store{lim: ms, closer: ms}, nil
	}
	co := redisstore.ClientOption(o.redisAddrs)
	co.Username, co.Password = o.redisUser, o.redisPassword
	rs, err := redisstore.New(redisstore.Options{ClientOption: co, Timeout: c.storeTimeout, OnStoreError: o.policy, Logger: log})
	if err != nil {
		return store{}, err
	}
	reg.MustRegister(newRedisCollector(rs))
	return store{
		lim: rs, closer: rs,
		degraded: func() []string { return rs.Health().Degraded() },
	}, nil
}

// httpServer is an HTTP server of h with the listeners' timeouts and
// header bound, so that a client that sends slowly, or never finishes,
// holds a connection (and a goroutine) for a bounded time.
func (c serveConfig) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.readHeaderTimeout,
		ReadTimeout:       c.readTimeout,
		WriteTimeout:      c.writeTimeout,
		IdleTimeout:       c.idleTimeout,
		MaxHeaderBytes:    c.maxHeaderBytes,
	}
}

// listen opens the listeners; an empty address gives a nil listener.
func listen(addrs ...string) ([]net.Listener, error) {
	out := make([]net.Listener, len(addrs))
	for i, a := range addrs {
		if a == "" {
			continue
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			for _, o := range out[:i] {
				if o != nil {
					o.Close()
				}
			}
			return nil, err
		}
		out[i] = l
	}
	return out, nil
}

func (s *service) serve(f func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("listener stopped", "err", err)
		}
	}()
}

// shutdown stops accepting, lets in-flight calls finish (up to the
// shutdown timeout), then closes the store.
func (s *service) shutdown() {
	s.draining.Store(true)
	s.health.Shutdown()
	s.watchStop()
	ctx, cancel := context.WithTimeout(context.Background(), s.shutdownIn)
	defer cancel()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	if s.httpSrv != nil {
		_ = s.httpSrv.Shutdown(ctx)
	}
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	if s.adminSrv != nil {
		_ = s.adminSrv.Shutdown(ctx)
	}
	s.wg.Wait()
	if err := s.store.Close(); err != nil {
		s.log.Warn("closing the store", "err", err)
	}
	if s.stopTracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.stopTracing(ctx); err != nil {
			s.log.Warn("flushing traces", "err", err)
		}
	}
}
