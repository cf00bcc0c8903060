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
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/gateway/tlsreload"
	"github.com/bouncerhq/bouncer/rules"
)

// gatewayFlags are `bouncer gateway`'s flags: serve's, less the service's
// listeners (the gateway's are in its config file).
func gatewayFlags(c *serveConfig, stderr io.Writer) *flag.FlagSet {
	full := serveFlags(c, io.Discard)
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { gatewayUsage(fs.Output()) }
	for _, name := range []string{"config", "store", "store-tls-ca", "store-tls-cert", "store-tls-key", "store-tls-server-name",
		"store-tls-insecure-skip-verify", "store-client-name", "store-timeout", "on-store-error", "mode", "log-level", "log-format",
		"shutdown-timeout", "watch", "otel-endpoint", "otel-insecure", "otel-sample-ratio", "read-header-timeout", "read-timeout", "write-timeout", "idle-timeout", "max-header-bytes", "admin-token-file", "state-file", "state-save-interval"} {
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
	return runApp("gateway", gatewayFlags(&c, stderr), &c, args, stderr, startGateway)
}

// gatewayService is a running `bouncer gateway`: the app, and the
// gateway's listeners. Its listeners and admin address are read once, at
// start; a reload (the app's Reloader, with reloadGateway as its Also)
// rebuilds the rest from the file.
type gatewayService struct {
	*app
	current  atomic.Pointer[gateway.Gateway]
	gm       *gateway.Metrics
	tracer   trace.Tracer   // nil unless --otel-endpoint
	servers  []*http.Server // the listeners', in config order
	inflight sync.WaitGroup // requests being served, WebSockets included
	certs    []*tlsreload.Reloader
	addrs    []string // the listeners' addresses, in config order, then the admin's
}

func startGateway(ctx context.Context, c serveConfig, o serveOptions, log *slog.Logger) (*gatewayService, error) {
	cfg, err := gateway.Load(c.config)
	if err != nil {
		return nil, err
	}
	// The gateway sees every request end: it can hold concurrency leases.
	a, err := openApp(ctx, c, o, log, cfg.Rules, rules.LoadOptions{AllowConcurrency: true, Mode: o.mode})
	if err != nil {
		return nil, err
	}
	s := &gatewayService{app: a, gm: gateway.NewMetrics(a.reg)}
	a.close = s.closeGateway
	if a.tracing {
		s.tracer = otel.Tracer(gateway.TracerName)
	}
	g, err := s.build(cfg)
	if err != nil {
		a.shutdown()
		return nil, err
	}
	s.current.Store(g)
	a.reloader.Also, a.reloader.AlsoFiles = s.reloadGateway, []string{cfg.File}
	if err := s.listen(cfg); err != nil {
		a.shutdown()
		return nil, err
	}
	upstreams := admin.Extra{
		Endpoint: admin.Endpoint{Method: "GET", Path: "/v1/upstreams", Description: "each route's upstreams and their health"},
		Handler:  http.HandlerFunc(s.serveUpstreams),
	}
	var listeners []admin.Listener
	for i, l := range cfg.Listeners {
		name := "http"
		if l.TLS != nil {
			name = "https"
		}
		listeners = append(listeners, admin.Listener{Name: name, Addr: s.addrs[i]})
	}
	if err := a.serveAdmin(cfg.Admin, "gateway", listeners, upstreams); err != nil {
		a.shutdown()
		return nil, fmt.Errorf("%s: admin: %w", cfg.File, err)
	}
	if a.adminAddr != "" {
		s.addrs = append(s.addrs, a.adminAddr)
	}
	a.watch(ctx)
	log.Info("gateway serving", "listeners", s.addrs, "routes", len(cfg.Routes), "store", redactURL(c.store), "config", c.config)
	return s, nil
}

// serveUpstreams answers GET /v1/upstreams: {"upstreams": [...]}, each
// upstream of each route with its health (route.UpstreamHealth).
func (s *gatewayService) serveUpstreams(w http.ResponseWriter, _ *http.Request) {
	hs := s.current.Load().Health()
	if hs == nil {
		hs = []route.UpstreamHealth{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"upstreams": hs})
}

// build builds the gateway of cfg on the app's engine (none without
// rules).
func (s *gatewayService) build(cfg *gateway.Config) (*gateway.Gateway, error) {
	var e *rules.Engine
	if cfg.Rules != "" {
		e = s.engine
	}
	return gateway.New(cfg, gateway.Options{Engine: e, Logger: s.log, Metrics: s.gm, Tracer: s.tracer, MaxHeaderBytes: s.c.maxHeaderBytes})
}

// reloadGateway is the gateway's part of a reload (the Reloader's Also):
// it reads the config again and swaps in a gateway built from it, on the
// rules the engine now serves. A config that fails anywhere is rejected
// whole, and the old one keeps serving. It rebuilds every time: the
// files the config names (keys, JWKS, descriptor sets) may have changed.
func (s *gatewayService) reloadGateway(*rules.Config) (changed bool, err error) {
	cfg, err := gateway.Load(s.c.config)
	if err != nil {
		return false, gatewayProblems(s.c.config, err)
	}
	if cfg.Rules != s.reloader.Path {
		return false, gatewayProblems(cfg.File, fmt.Errorf("rules: the file named is %q, %q when the gateway started: restart the gateway to serve other rules", cfg.Rules, s.reloader.Path))
	}
	g, err := s.build(cfg)
	if err != nil {
		return false, gatewayProblems(cfg.File, err)
	}
	s.current.Swap(g).Close()
	for _, r := range s.certs {
		_ = r.Reload()
	}
	return true, nil
}

// gatewayProblems is err as a *rules.ConfigError, so that the reload
// reports each problem with its file and line: a gateway.ConfigError's
// own, else err as one problem of file.
func gatewayProblems(file string, err error) error {
	if ce, ok := errors.AsType[*gateway.ConfigError](err); ok {
		return &rules.ConfigError{Problems: ce.Problems}
	}
	return &rules.ConfigError{Problems: []rules.Problem{{File: file, Reason: err.Error()}}}
}

// listen serves the listeners of cfg.
func (s *gatewayService) listen(cfg *gateway.Config) error {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Counted for the shutdown, which net/http's does not wait for
		// once a connection is hijacked: a WebSocket's handler runs as
		// long as the tunnel.
		s.inflight.Add(1)
		defer s.inflight.Done()
		s.current.Load().ServeHTTP(w, r)
	})
	s.drain = s.drainGateway
	for _, l := range cfg.Listeners {
		ln, err := s.listener(l)
		if err != nil {
			return fmt.Errorf("%s:%d: listeners: %w", cfg.File, l.Line, err)
		}
		srv := s.c.httpServer(handler)
		// The gateway answers headers over the bound itself, in JSON;
		// net/http's plain 431 is for those twice as large.
		srv.MaxHeaderBytes = 2 * s.c.maxHeaderBytes
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
		// gRPC clients speak HTTP/2 without TLS (h2c) to a plain
		// listener.
		srv.Protocols.SetUnencryptedHTTP2(l.TLS == nil)
		s.servers = append(s.servers, srv)
		s.addrs = append(s.addrs, ln.Addr().String())
		s.serve(func() error { return srv.Serve(ln) })
	}
	return nil
}

// listener opens l, with TLS (its certificates reloaded when their
// files change) if it has it.
func (s *gatewayService) listener(l gateway.Listener) (net.Listener, error) {
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil || l.TLS == nil {
		return ln, err
	}
	r, err := tlsreload.New(*l.TLS, tlsreload.Options{Logger: s.log})
	if err != nil {
		ln.Close()
		return nil, err
	}
	s.certs = append(s.certs, r)
	return tls.NewListener(ln, r.TLSConfig()), nil
}

// drainGateway stops the listeners, lets the requests in flight finish,
// and gives WebSockets what is left of ctx's time.
func (s *gatewayService) drainGateway(ctx context.Context) {
	var wg sync.WaitGroup
	for _, srv := range s.servers {
		wg.Go(func() { shutdownServer(ctx, srv) })
	}
	wg.Wait()
	// No request comes in now; those that hijacked their connection (a
	// WebSocket) are still served.
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
}

// closeGateway closes the gateway and the certificates' reloaders.
func (s *gatewayService) closeGateway() {
	if g := s.current.Load(); g != nil {
		g.Close()
	}
	for _, r := range s.certs {
		r.Close()
	}
}
