package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/gateway/tlsreload"
	"github.com/bouncerhq/bouncer/internal/filewatch"
	"github.com/bouncerhq/bouncer/metrics"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/tracing"
)

// gatewayFlags are `bouncer gateway`'s flags: serve's, less the service's
// listeners (the gateway's are in its config file).
func gatewayFlags(c *serveConfig, stderr io.Writer) *flag.FlagSet {
	full := serveFlags(c, io.Discard)
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { gatewayUsage(fs.Output()) }
	for _, name := range []string{"config", "store", "store-timeout", "on-store-error", "log-level", "log-format",
		"shutdown-timeout", "watch", "otel-endpoint", "otel-insecure", "otel-sample-ratio", "read-header-timeout", "read-timeout", "write-timeout", "idle-timeout", "max-header-bytes"} {
		f := full.Lookup(name)
		usage := f.Usage
		if name == "config" {
			usage = "the gateway's config file (listeners, auth, routes; its rules file as bouncer serve reads it); required"
		}
		fs.Var(f.Value, name, usage)
	}
	return fs
}

func gatewayUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: bouncer gateway --config FILE [flags]")
	fmt.Fprintln(w, "       bouncer gateway hash-key KEY")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Serves the API gateway: routes requests to upstreams, authenticates them (JWT,")
	fmt.Fprintln(w, "API keys), limits them with the rules, and transcodes JSON/HTTP to gRPC where a")
	fmt.Fprintln(w, "route says so. Reloads the config on change and on SIGHUP; drains and stops on")
	fmt.Fprintln(w, "SIGTERM or SIGINT. hash-key prints the hash of an API key for the config.")
	fmt.Fprintln(w)
	var c serveConfig
	printFlags(w, gatewayFlags(&c, w))
}

func runGateway(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "hash-key" {
		if len(args) != 2 || args[1] == "" {
			fmt.Fprintln(stderr, "usage: bouncer gateway hash-key KEY")
			return exitUsage
		}
		fmt.Fprintln(stdout, auth.HashKey(args[1]))
		return exitOK
	}
	var c serveConfig
	opts, ok := parseServeFlags("gateway", gatewayFlags(&c, stderr), &c, args, stderr)
	if !ok {
		return exitUsage
	}
	log := newLogger(stderr, c.logFormat, opts.level)
	return untilSignal(log, func(ctx context.Context) (reload, shutdown func(), err error) {
		gw, err := startGateway(ctx, c, opts, log)
		if err != nil {
			return nil, nil, err
		}
		return gw.reload, gw.shutdown, nil
	})
}

// gatewayService is a running `bouncer gateway`.
type gatewayService struct {
	c        serveConfig
	log      *slog.Logger
	current  atomic.Pointer[gateway.Gateway]
	engine   *rules.Engine // nil when the config has no rules
	rulesM   *metrics.Metrics
	gm       *gateway.Metrics
	store    io.Closer
	servers  []*http.Server // the listeners', in config order
	inflight sync.WaitGroup // requests being served, WebSockets included
	admin    *http.Server   // nil without an admin address
	certs    []*tlsreload.Reloader
	addrs    []string // the listeners' addresses, in config order, then the admin's
	mu       sync.Mutex
	wg       sync.WaitGroup
	stopW    context.CancelFunc
	drain    atomic.Bool

	tracer      trace.Tracer // nil unless --otel-endpoint
	stopTracing func(context.Context) error
}

func startGateway(ctx context.Context, c serveConfig, o serveOptions, log *slog.Logger) (*gatewayService, error) {
	cfg, err := gateway.Load(c.config)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	metrics.RegisterBuildInfo(reg)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s := &gatewayService{c: c, log: log, gm: gateway.NewMetrics(reg)}
	st, err := openStore(c, o, log, reg)
	if err != nil {
		return nil, err
	}
	s.store = st.closer
	fail := func(err error) (*gatewayService, error) {
		s.closeAll()
		return nil, err
	}
	if c.otelEndpoint != "" {
		stop, err := tracing.Start(ctx, tracing.Options{Endpoint: c.otelEndpoint, Insecure: c.otelInsecure, SampleRatio: c.otelSample})
		if err != nil {
			return fail(err)
		}
		s.stopTracing, st.lim, s.tracer = stop, tracing.Limiter(st.lim), otel.Tracer(gateway.TracerName)
	}
	if cfg.Rules != "" {
		rc, err := s.loadRules(cfg.Rules)
		if err != nil {
			return fail(err)
		}
		s.rulesM = metrics.New(reg)
		s.rulesM.Serving(rc)
		s.engine = rules.NewEngine(rc, s.rulesM.Limiter(st.lim))
		s.engine.Observe = s.rulesM.Observe
		s.engine.Logger = log
	}
	g, err := gateway.New(cfg, gateway.Options{Engine: s.engine, Logger: log, Metrics: s.gm, Tracer: s.tracer, MaxHeaderBytes: c.maxHeaderBytes})
	if err != nil {
		return fail(err)
	}
	s.current.Store(g)

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Counted for the shutdown, which net/http's does not wait for
		// once a connection is hijacked: a WebSocket's handler runs as
		// long as the tunnel.
		s.inflight.Add(1)
		defer s.inflight.Done()
		s.current.Load().ServeHTTP(w, r)
	})
	for _, l := range cfg.Listeners {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return fail(fmt.Errorf("%s:%d: listeners: %w", cfg.File, l.Line, err))
		}
		srv := c.httpServer(handler)
		// The gateway answers headers over the bound itself, in JSON;
		// net/http's plain 431 is for those twice as large.
		srv.MaxHeaderBytes = 2 * c.maxHeaderBytes
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
		if l.TLS != nil {
			r, err := tlsreload.New(tlsreload.Config{CertFile: l.TLS.CertFile, KeyFile: l.TLS.KeyFile, ClientCAFile: l.TLS.ClientCAFile,
				ClientAuth: l.TLS.ClientAuth, MinVersion: l.TLS.MinVersion}, tlsreload.Options{Logger: log})
			if err != nil {
				ln.Close()
				return fail(fmt.Errorf("%s:%d: listeners: %w", cfg.File, l.Line, err))
			}
			s.certs = append(s.certs, r)
			ln = tls.NewListener(ln, r.TLSConfig())
		} else {
			// gRPC clients speak HTTP/2 without TLS (h2c) to a plain
			// listener.
			srv.Protocols.SetUnencryptedHTTP2(true)
		}
		s.servers = append(s.servers, srv)
		s.addrs = append(s.addrs, ln.Addr().String())
		s.serve(srv, ln)
	}
	if cfg.Admin != "" {
		ln, err := net.Listen("tcp", cfg.Admin)
		if err != nil {
			return fail(fmt.Errorf("%s: admin: %w", cfg.File, err))
		}
		srv := c.httpServer(s.adminHandler(reg, st.degraded))
		s.admin = srv
		s.addrs = append(s.addrs, ln.Addr().String())
		s.serve(srv, ln)
	}
	wctx, cancel := context.WithCancel(ctx)
	s.stopW = cancel
	if c.watch {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.watch(wctx, cfg); err != nil {
				log.Warn("not watching the config for changes; reload with SIGHUP", "err", err)
			}
		}()
	}
	log.Info("gateway serving", "listeners", s.addrs, "routes", len(cfg.Routes), "store", redactURL(c.store), "config", c.config)
	return s, nil
}

func (s *gatewayService) loadRules(path string) (*rules.Config, error) {
	// The gateway sees every request end: it can hold concurrency leases.
	rc, err := rules.LoadOptions{AllowConcurrency: true}.Load(path)
	if err != nil {
		return nil, err
	}
	return rc, nil
}

// reload reads the config and its rules again and swaps in a gateway
// built from them; a config that fails anywhere is rejected whole, and
// the old one keeps serving.
func (s *gatewayService) reload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	reject := func(err error) { s.log.Error("config rejected; the old one keeps serving", "err", err) }
	cfg, err := gateway.Load(s.c.config)
	if err != nil {
		reject(err)
		return
	}
	var old *rules.Config
	if cfg.Rules != "" {
		if s.engine == nil {
			reject(errors.New("the config now names a rules file: restart the gateway to add rules to one started without"))
			return
		}
		rc, err := s.loadRules(cfg.Rules)
		if err != nil {
			reject(err)
			return
		}
		old = s.engine.Swap(rc)
	}
	g, err := gateway.New(cfg, gateway.Options{Engine: s.engine, Logger: s.log, Metrics: s.gm, Tracer: s.tracer, MaxHeaderBytes: s.c.maxHeaderBytes})
	if err != nil {
		if old != nil {
			s.engine.Swap(old)
		}
		reject(err)
		return
	}
	if s.rulesM != nil {
		s.rulesM.Serving(s.engine.Config())
	}
	prev := s.current.Swap(g)
	prev.Close()
	for _, r := range s.certs {
		_ = r.Reload()
	}
	s.log.Info("config reloaded", "routes", len(cfg.Routes))
}

// watch reloads when the config file or its rules change.
func (s *gatewayService) watch(ctx context.Context, cfg *gateway.Config) error {
	files := []string{cfg.File}
	var dirs map[string]func(string) bool
	if cfg.Rules != "" {
		if fi, err := os.Stat(cfg.Rules); err == nil && fi.IsDir() {
			dirs = map[string]func(string) bool{cfg.Rules: rules.IsConfigFile}
		} else {
			files = append(files, cfg.Rules)
		}
	}
	w, err := filewatch.New(files, dirs)
	if err != nil {
		return err
	}
	defer w.Close()
	// One reload for a write in several steps.
	w.Run(ctx.Done(), 100*time.Millisecond, s.reload, func(err error) bool {
		s.log.Warn("watching the config", "err", err)
		return false
	})
	return nil
}

func (s *gatewayService) adminHandler(reg *prometheus.Registry, degraded func() []string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if s.drain.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"status":"draining"}`+"\n")
			return
		}
		if degraded != nil {
			if why := degraded(); len(why) > 0 {
				fmt.Fprintf(w, "{\"status\":\"degraded\",\"reasons\":%q}\n", why)
				return
			}
		}
		io.WriteString(w, `{"status":"ready"}`+"\n")
	})
	mux.HandleFunc("GET /v1/upstreams", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.current.Load().Health())
	})
	return mux
}

func (s *gatewayService) serve(srv *http.Server, ln net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("listener stopped", "err", err)
		}
	}()
}

// shutdown stops accepting, lets in-flight requests finish (up to the
// shutdown timeout), then closes the gateway and the store.
func (s *gatewayService) shutdown() {
	s.drain.Store(true)
	if s.stopW != nil {
		s.stopW()
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.c.shutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range s.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
			}
		}()
	}
	wg.Wait()
	// No request comes in now; those that hijacked their connection (a
	// WebSocket) are still served. They get what is left of the timeout.
	tunnels := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(tunnels)
	}()
	select {
	case <-tunnels:
	case <-ctx.Done():
		s.log.Warn("shutdown timeout: WebSockets still open are cut")
	}
	// The admin listener stays up while the others drain: /readyz says
	// draining, and /metrics is still read.
	if s.admin != nil {
		if err := s.admin.Shutdown(ctx); err != nil {
			s.admin.Close()
		}
	}
	s.wg.Wait()
	s.closeAll()
}

func (s *gatewayService) closeAll() {
	if g := s.current.Load(); g != nil {
		g.Close()
	}
	for _, r := range s.certs {
		r.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.stopTracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.stopTracing(ctx)
	}
}
