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
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/internal/bearer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/metrics"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/rules"
	bstore "github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/tracing"
)

// app is what every service command runs (in the spirit of
// benbjohnson/wtf's Main): the metrics registry with the build info and
// the Go and process collectors, the store, tracing, the rules engine
// and its reloads (SIGHUP and the file watch, through one
// rules.Reloader, so that every reload has a history and metrics), the
// admin listener, and the drain and close at the end. `bouncer serve`
// and `bouncer gateway` each add only their own listeners and handlers.
type app struct {
	c   serveConfig
	log *slog.Logger

	reg      *prometheus.Registry
	metrics  *metrics.Metrics
	store    store
	tracing  bool // --otel-endpoint is set
	engine   *rules.Engine
	reloader *rules.Reloader

	adminSrv   *http.Server // nil without an admin address
	adminAddr  string
	adminToken bearer.Token   // what the admin API's writes require
	service    admin.Service  // what the live page shows of the process
	live       *admin.History // the live page's history of decisions
	stopLive   func()         // stops sampling live; nil until serveAdmin
	draining   atomic.Bool
	wg         sync.WaitGroup // the listeners and the watch
	stopWatch  context.CancelFunc

	// drain, if not nil, drains the command's listeners on shutdown,
	// until ctx ends at most; close, if not nil, then closes what the
	// command opened, before the store closes.
	drain func(ctx context.Context)
	close func()

	stopTracing func(context.Context) error // nil when tracing is off
}

// openApp loads the rules at rulesPath ("" for none) with lo, opens the
// store and tracing, and builds the engine and its reloader. The
// command then adds its listeners, serves the admin API, and starts.
func openApp(ctx context.Context, c serveConfig, o serveOptions, log *slog.Logger, rulesPath string, lo rules.LoadOptions) (*app, error) {
	var cfg *rules.Config
	if rulesPath != "" {
		var err error
		if cfg, err = lo.Load(rulesPath); err != nil {
			return nil, err
		}
	}
	a := &app{c: c, log: log, reg: prometheus.NewRegistry(), adminToken: o.adminToken}
	a.service = admin.Service{Store: storeKind(o.redis), Started: c.started}
	if o.redis != nil {
		a.service.StoreAddrs = o.redis.InitAddress
	}
	if a.service.Started.IsZero() {
		a.service.Started = time.Now()
	}
	a.live = admin.NewHistory(a.reg, admin.HistoryOptions{})
	a.reg.MustRegister(metrics.BuildInfo(readBuild()))
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.metrics = metrics.New(a.reg)
	var err error
	if a.store, err = openStore(c, o, log, a.reg); err != nil {
		return nil, err
	}
	lim := a.store.lim
	if c.otelEndpoint != "" {
		stop, err := tracing.Start(ctx, tracing.Options{Endpoint: c.otelEndpoint, Insecure: c.otelInsecure, SampleRatio: c.otelSample})
		if err != nil {
			a.store.closer.Close()
			return nil, err
		}
		a.stopTracing, a.tracing, lim = stop, true, tracing.Limiter(lim)
	}
	a.engine = rules.NewEngine(cfg, a.metrics.Limiter(lim))
	if c.adminKeys > 0 {
		a.engine.Keys = admin.NewKeyIndex(c.adminKeys)
	}
	a.engine.Observe = a.metrics.Observe
	a.engine.Logger = log
	a.metrics.Serving(a.engine.Config())
	a.reloader = &rules.Reloader{Path: rulesPath, Engine: a.engine, Options: lo,
		OnReload: a.metrics.Reloaded, OnResult: a.logReload}
	if c.refMetrics {
		a.countAsReference()
	}
	return a, nil
}

// countAsReference counts decisions and reloads under
// envoyproxy/ratelimit's metric names too (--reference-metrics).
func (a *app) countAsReference() {
	ref := metrics.NewReference(a.reg)
	ref.Loaded(a.engine.Config(), true, nil)
	observe, reloaded := a.engine.Observe, a.reloader.OnReload
	a.engine.Observe = func(domain string, resp *rules.Response, err error) {
		observe(domain, resp, err)
		ref.Observe(domain, resp, err)
	}
	a.reloader.OnReload = func(c *rules.Config, changed bool, err error) {
		reloaded(c, changed, err)
		ref.Loaded(c, changed, err)
	}
}

// logReload logs what a reload attempt did: a rejection as each problem
// on a line of its own, then the rejection (logProblems).
func (a *app) logReload(res rules.ReloadResult) {
	switch res.Outcome {
	case rules.Rejected, rules.WatchFailed:
		logProblems(a.log, res.Outcome.String(), res.Problems, "version", res.Config.Version)
	default: // reloaded, unchanged (a SIGHUP with nothing new), fixed back
		a.log.Info(res.Outcome.String(), "version", res.Config.Version)
	}
}

// logProblems logs one "config problem" line per problem, with its
// file, line (when it has one) and reason, then msg with attrs and the
// count of problems: a config with many problems reads one per line, as
// bouncer check prints them, never as one line of escaped newlines. msg
// comes last so that whoever waits for it has every problem already.
func logProblems(log *slog.Logger, msg string, problems []rules.Problem, attrs ...any) {
	for _, p := range problems {
		pa := []any{"file", p.File}
		if p.Line > 0 {
			pa = append(pa, "line", p.Line)
		}
		log.Error("config problem", append(pa, "reason", p.Reason)...)
	}
	log.Error(msg, append(attrs, "problems", len(problems))...)
}

// configProblems returns the problems of the config err rejects (a rules
// or a gateway *ConfigError), or nil if err is of another kind.
func configProblems(err error) []rules.Problem {
	if ce, ok := errors.AsType[*rules.ConfigError](err); ok {
		return ce.Problems
	}
	if ce, ok := errors.AsType[*gateway.ConfigError](err); ok {
		return ce.Problems
	}
	return nil
}

// serveAdmin serves the admin API on addr ("" for none), with the
// command's own endpoints in extra, which its index lists, and samples
// the live page's history. The live page names command ("serve" or
// "gateway") and its listeners, with the admin one.
func (a *app) serveAdmin(addr, command string, listeners []admin.Listener, extra ...admin.Extra) error {
	if addr == "" {
		return nil
	}
	setting := a.c.setting("admin-addr")
	if command != "serve" {
		setting = "the config's admin"
	}
	ln, err := listen(setting, addr, listeners)
	if err != nil {
		return err
	}
	a.adminAddr = ln.Addr().String()
	a.service.Command = command
	a.service.Listeners = append(listeners, admin.Listener{Name: "admin", Addr: a.adminAddr})
	h := admin.Handler(admin.Options{Engine: a.engine, Gatherer: a.reg, Ready: func() bool { return !a.draining.Load() },
		Degraded: a.store.degraded, Reloads: a.reloader.History, History: a.live, Service: &a.service, Extra: extra,
		Credentials: a.adminToken.Set(), Logger: a.log,
		OnLimitsChange: func(c admin.LimitsChange) { a.metrics.LimitsChanged(c.Domain, c.Rule, c.Action) }})
	a.adminSrv = a.c.httpServer(a.adminToken.Guard(h, bearer.Writes))
	a.serve(func() error { return a.adminSrv.Serve(ln) })
	if !a.c.liveByHand {
		ctx, stop := context.WithCancel(context.Background())
		a.stopLive = stop
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.live.Run(ctx)
		}()
	}
	return nil
}

// listen listens on addr, which setting (a flag) gave. Its error names
// the setting, the address and the reason alone ("--http-addr
// 127.0.0.1:8080: address already in use"), then the other listeners'
// addresses (others; those without an address are left out), so that
// an operator sees which setting to change and what to change it to.
func listen(setting, addr string, others []admin.Listener) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	reason := err
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Err != nil {
		reason = oe.Err
		if se, ok := errors.AsType[*os.SyscallError](reason); ok {
			reason = se.Err
		}
	}
	msg := fmt.Sprintf("%s %s: %v", setting, addr, reason)
	var list []string
	for _, l := range others {
		if l.Addr != "" {
			list = append(list, l.Name+" "+l.Addr)
		}
	}
	if len(list) > 0 {
		msg += "; the other listeners: " + strings.Join(list, ", ")
	}
	return nil, errors.New(msg)
}

// storeKind names the store of --store for the live page: memory, redis,
// redis cluster (several addresses) or redis sentinel.
func storeKind(co *rueidis.ClientOption) string {
	switch {
	case co == nil:
		return "memory"
	case co.Sentinel.MasterSet != "":
		return "redis sentinel"
	case len(co.InitAddress) > 1:
		return "redis cluster"
	}
	return "redis"
}

// serve runs a listener's serve loop until shutdown stops it.
func (a *app) serve(f func() error) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
			a.log.Error("listener stopped", "err", err)
		}
	}()
}

// watch reloads the config whenever its files change (with --watch),
// until ctx ends or shutdown begins.
func (a *app) watch(ctx context.Context) {
	ctx, a.stopWatch = context.WithCancel(ctx)
	if !a.c.watch {
		return
	}
	a.reloader.Watching = func() { a.log.Info("watching the config for changes") }
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := a.reloader.Watch(ctx); err != nil {
			a.log.Warn("not watching the config for changes; reload with SIGHUP", "err", err)
		}
	}()
}

// reload loads the config again; the reloader logs and counts what it
// did.
func (a *app) reload() { _ = a.reloader.Reload() }

// shutdown stops accepting, lets what is in flight finish (up to the
// shutdown timeout), then closes what the command opened, the store and
// tracing. The admin listener stays up while the others drain: /readyz
// says draining, and /metrics is still read. It is also how a command
// that failed to start closes what it had opened.
func (a *app) shutdown() {
	a.draining.Store(true)
	if a.stopWatch != nil {
		a.stopWatch()
	}
	if a.stopLive != nil {
		a.stopLive()
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.c.shutdownTimeout)
	defer cancel()
	if a.drain != nil {
		a.drain(ctx)
	}
	if a.adminSrv != nil {
		shutdownServer(ctx, a.adminSrv)
	}
	a.wg.Wait()
	if a.close != nil {
		a.close()
	}
	if err := a.store.closer.Close(); err != nil {
		a.log.Warn("closing the store", "err", err)
	}
	if a.stopTracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.stopTracing(ctx); err != nil {
			a.log.Warn("flushing traces", "err", err)
		}
	}
}

// shutdownServer lets srv's requests finish until ctx ends, then cuts
// the connections left.
func shutdownServer(ctx context.Context, srv *http.Server) {
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
	}
}

// runApp runs a service command: it parses args into c with fs (serve's
// flags or the gateway's) and validates them, starts the service with
// start, reloads it on SIGHUP, and shuts it down (draining what is in
// flight) on SIGTERM or SIGINT. It returns the command's exit code.
func runApp[S interface {
	reload()
	shutdown()
}](name string, fs *flag.FlagSet, c *serveConfig, args []string, stderr io.Writer,
	start func(context.Context, serveConfig, serveOptions, *slog.Logger) (S, error)) int {
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bouncer %s: unexpected argument %q\n", name, fs.Arg(0))
		return exitUsage
	}
	if c.reference {
		if err := c.readReference(fs, os.LookupEnv); err != nil {
			fmt.Fprintf(stderr, "bouncer %s: %v\n", name, err)
			return exitUsage
		}
	}
	o, err := c.validate()
	if err != nil {
		fmt.Fprintf(stderr, "bouncer %s: %v\n", name, err)
		return exitUsage
	}
	log := newLogger(stderr, c.logFormat, o.level)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Before the start: a SIGHUP that comes once the service answers, and
	// before it would be caught, would end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	s, err := start(ctx, *c, o, log)
	if err != nil {
		if ps := configProblems(err); ps != nil {
			logProblems(log, "cannot start: the config has problems", ps)
		} else {
			log.Error("cannot start", "err", err)
		}
		return exitFail
	}
	go func() {
		for range hup {
			log.Info("SIGHUP: reloading the config")
			s.reload()
		}
	}()
	<-ctx.Done()
	stop()
	log.Info("shutting down: draining what is in flight")
	s.shutdown()
	log.Info("stopped")
	return exitOK
}

// store is the limiter a command counts in, and what it can tell of it.
type store struct {
	lim      bouncer.Limiter
	closer   io.Closer
	degraded func() []string // why decisions are made without the store now; nil: never
	demands  rlqs.Demands    // where RLQS clients' demands are shared; nil: in the process
}

// openStore opens the store of --store: memory, or Redis, whose
// collector it registers with reg. A Redis store starts whether or not
// Redis answers, and connects in the background; meanwhile checks decide
// by policy.
func openStore(c serveConfig, o serveOptions, log *slog.Logger, reg prometheus.Registerer) (store, error) {
	if o.redis == nil {
		ms := memstore.New(memstore.Options{Persistent: c.stateFile != ""})
		if c.stateFile == "" {
			return store{lim: ms, closer: ms}, nil
		}
		sf, err := openStateFile(ms, c.stateFile, c.stateSaveInterval, log, reg)
		if err != nil {
			ms.Close()
			return store{}, err
		}
		return store{lim: ms, closer: sf}, nil
	}
	rs, err := redisstore.New(redisstore.Options{Client: *o.redis, TLS: o.redisTLS, Timeout: c.storeTimeout, OnStoreError: o.policy, Logger: log})
	if err != nil {
		return store{}, err
	}
	// The first checks are decided in Redis, not by policy while the
	// store connects (a fresh instance would forget their charges),
	// unless Redis takes longer than the start-up wait to answer.
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	if rs.WaitConnected(ctx) != nil {
		log.Warn("serving before Redis answered: deciding by each limit's on_store_error policy until it does", "waited", startWait)
	}
	// Limits in lease or async mode are decided by the hybrid limiter;
	// strict ones pass through it to Redis as they are.
	ho := hybrid.Options{OnStoreError: o.policy, Region: c.region, RegionTTL: c.regionTTL}
	var peers []*redisstore.Store
	for name, co := range o.peers {
		ps, err := redisstore.New(redisstore.Options{Client: co, TLS: o.redisTLS, Timeout: peerTimeout, OnStoreError: o.policy, Logger: log.With("region", name)})
		if err != nil {
			closeAll(peers)
			rs.Close()
			return store{}, fmt.Errorf("--region-peers %s: %v", name, err)
		}
		if ho.Peers == nil {
			ho.Peers = map[string]bstore.Sharer{}
		}
		ho.Peers[name] = ps
		peers = append(peers, ps)
	}
	hy := hybrid.New(rs, nil, ho)
	reg.MustRegister(newRedisCollector(rs), newHybridCollector(hy))
	return store{
		lim: hy, closer: closeBoth{hy, rs, peers}, demands: rs,
		degraded: func() []string { return rs.Health().Degraded() },
	}, nil
}

// peerTimeout is the deadline of a call to another region's Redis: a
// relay of shares, never on a request's path, over a link whose round
// trip may be a few hundred milliseconds (--store-timeout's 50 ms would
// time every relay out).
const peerTimeout = time.Second

func closeAll(ss []*redisstore.Store) {
	for _, s := range ss {
		s.Close()
	}
}

// startWait bounds how long a service waits at start for Redis to
// answer before it serves.
const startWait = 2 * time.Second

// closeBoth closes the hybrid limiter, which gives its leases back, then
// the Redis store under it.
type closeBoth struct {
	hy    *hybrid.Limiter
	rs    *redisstore.Store
	peers []*redisstore.Store // the other regions' (--region-peers)
}

func (c closeBoth) Close() error {
	c.hy.Close()
	closeAll(c.peers)
	return c.rs.Close()
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
