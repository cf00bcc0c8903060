package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/internal/bearer"
	"github.com/bouncerhq/bouncer/jsonapi"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/rls"
	"github.com/bouncerhq/bouncer/rules"
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
	storeTLS        redisstore.TLSFiles // --store-tls-ca and the other TLS flags
	storeClientName string
	storeTimeout    time.Duration
	region          string        // --region
	regionPeers     string        // --region-peers
	regionTTL       time.Duration // --region-ttl
	onStoreError    string
	mode            string
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
	refMetrics      bool // --reference-metrics

	stateFile         string        // --state-file
	stateSaveInterval time.Duration // --state-save-interval

	// No flag sets these; tests do.
	liveByHand bool      // the live page's samples are the test's (admin.History.Sample)
	started    time.Time // when the live page says the process started; zero: when it did

	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	maxHeaderBytes    int

	apiTokenFile   string // the JSON API's bearer token, in a file
	adminTokenFile string // the admin API's, for its writes

	envErrs []string        // environment variables whose values did not parse
	envSet  map[string]bool // the flags a BOUNCER_* variable set

	// reference reads envoyproxy/ratelimit's environment when neither
	// --config nor BOUNCER_CONFIG is given (refenv.go); ref is what it
	// read, for the log line at start.
	reference bool
	ref       *refEnv
}

func serveFlags(c *serveConfig, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { serveUsage(fs.Output()) }
	fs.StringVar(&c.config, "config", "", "config file, or directory of *.yaml and *.yml files (Bouncer's or envoyproxy/ratelimit's format); required, unless envoyproxy/ratelimit's environment gives it (see docs/deploy.md)")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "127.0.0.1:8081", "Envoy RLS v3 and RLQS gRPC listener")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:8080", "JSON API listener (POST /v1/check); empty to disable")
	fs.StringVar(&c.adminAddr, "admin-addr", "127.0.0.1:6070", "admin listener (health, metrics, pprof, rules); empty to disable")
	fs.StringVar(&c.store, "store", "memory", "memory, or redis://[[user]:password@]host:port[/db] (one server), redis://...@host:port,host:port... (a Cluster), redis://...@host:port[/db]?master_set=NAME[&addr=host:port...] (Sentinel); rediss:// for TLS; see docs/running.md#stores")
	fs.StringVar(&c.storeTLS.CA, "store-tls-ca", "", "with a rediss:// --store: a PEM bundle of the CAs that sign Redis's certificates, reloaded when it changes; unset: the system's roots")
	fs.StringVar(&c.storeTLS.Cert, "store-tls-cert", "", "with a rediss:// --store: a client certificate (PEM) for Redis's mutual TLS, reloaded when it changes; needs --store-tls-key")
	fs.StringVar(&c.storeTLS.Key, "store-tls-key", "", "with a rediss:// --store: the client certificate's private key (PEM)")
	fs.StringVar(&c.storeTLS.ServerName, "store-tls-server-name", "", "with a rediss:// --store: the name Redis's certificates must be valid for; unset: the host of each address dialled")
	fs.BoolVar(&c.storeTLS.InsecureSkipVerify, "store-tls-insecure-skip-verify", false, "with a rediss:// --store: accept any certificate from Redis (INSECURE: for a test bench only; logs a warning)")
	fs.StringVar(&c.storeClientName, "store-client-name", "", "the name of every Redis connection (CLIENT SETNAME, seen in CLIENT LIST); unset: bouncer-<hostname>-<pid>")
	fs.DurationVar(&c.storeTimeout, "store-timeout", redisstore.DefaultTimeout, "deadline of every Redis call; a check whose reply has not come by then decides by policy")
	fs.StringVar(&c.stateFile, "state-file", "", "with the memory store: restore its state from this file at start (refusing to start if it is damaged), and save it there every --state-save-interval and at shutdown; unset: state is lost at a restart; see docs/running.md#state-file")
	fs.DurationVar(&c.stateSaveInterval, "state-save-interval", time.Minute, "with --state-file: how often the memory store's state is saved")
	fs.StringVar(&c.onStoreError, "on-store-error", "local", "when Redis cannot answer, for rules that say nothing: local (each instance limits on its own), allow or deny")
	fs.StringVar(&c.region, "region", "", "with Redis: this instance's region, when regions with a Redis each share their limits (--region-peers names the others'); see docs/regions.md")
	fs.StringVar(&c.regionPeers, "region-peers", "", "with --region: the other regions' Redis, as NAME=URL separated by spaces (the URLs of --store; rediss:// ones use the TLS files of --store-tls-ca and the others)")
	fs.DurationVar(&c.regionTTL, "region-ttl", hybrid.DefaultRegionTTL, "with --region: how long this instance's shares live in the other regions' Redis; a region not heard from for longer is held to its static share")
	fs.StringVar(&c.mode, "mode", "strict", "with Redis, how limits whose rule names no mode are shared: strict (every check asks Redis), lease (quota taken in leases, spent locally) or async (counted locally, synced every 100ms); see docs/hybrid.md")
	fs.StringVar(&c.headers, "headers", "", "rate-limit headers to return: all, ietf, x-ratelimit or off; unset: all, but off in gRPC answers for domains in envoyproxy/ratelimit's format, as that project answers")
	fs.StringVar(&c.unknownDomain, "unknown-domain", "allow", "requests for a domain no config defines: allow (no limits, as envoyproxy/ratelimit) or error (NOT_FOUND / 404)")
	fs.BoolVar(&c.respMetadata, "response-metadata", false, "gRPC answers carry dynamic metadata: the request's domain, descriptors and hits, and the config metadata of the descriptors that passed (envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for in-flight calls")
	fs.StringVar(&c.otelEndpoint, "otel-endpoint", "", "OpenTelemetry: send traces over OTLP/gRPC to this collector (host:port); empty: tracing off")
	fs.BoolVar(&c.otelInsecure, "otel-insecure", false, "OpenTelemetry: send traces without TLS (a collector on the same host or pod)")
	fs.Float64Var(&c.otelSample, "otel-sample-ratio", 1, "OpenTelemetry: share of traces started here that are kept (calls whose caller sampled them always are)")
	fs.BoolVar(&c.refMetrics, "reference-metrics", false, "also count decisions under envoyproxy/ratelimit's metric names (ratelimit_service_rate_limit_total_hits and the others), in hits, as that project does; on by default when started with that project's environment")
	fs.BoolVar(&c.watch, "watch", true, "reload the config when its files change (SIGHUP reloads it either way)")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", 5*time.Second, "HTTP listeners: how long a client may take to send a request's headers (gRPC: to finish its connection handshake)")
	fs.DurationVar(&c.readTimeout, "read-timeout", 10*time.Second, "HTTP listeners: how long a client may take to send a whole request, body included")
	fs.DurationVar(&c.writeTimeout, "write-timeout", time.Minute, "HTTP listeners: how long an answer may take to write, from the end of the request's headers (admin pprof profiles must fit in it)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 2*time.Minute, "HTTP listeners: how long a keep-alive connection may wait for its next request")
	fs.IntVar(&c.maxHeaderBytes, "max-header-bytes", 64<<10, "HTTP and gRPC listeners: the most bytes of request headers a client may send")
	fs.IntVar(&c.adminKeys, "admin-keys", 10000, "how many recently decided keys the admin API can list (/v1/keys); 0 turns the index off")
	fs.StringVar(&c.apiTokenFile, "api-token-file", "", "a file holding the token the JSON API requires (Authorization: Bearer TOKEN) on POST /v1/check and /v1/report; or the token itself in BOUNCER_API_TOKEN; unset: no token")
	fs.StringVar(&c.adminTokenFile, "admin-token-file", "", "a file holding the token the admin API requires on its writes (POST /v1/keys/reset); or the token itself in BOUNCER_ADMIN_TOKEN; unset: no token")
	fs.VisitAll(func(f *flag.Flag) {
		env := "BOUNCER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		f.Usage += " (env " + env + ")"
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				c.envErrs = append(c.envErrs, fmt.Sprintf("%s=%q: %v", env, v, err))
			}
			if c.envSet == nil {
				c.envSet = map[string]bool{}
			}
			c.envSet[f.Name] = true
		}
	})
	return fs
}

func serveUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: bouncer serve --config PATH [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Serves the rate limit service: Envoy's RLS v3 and rate limit quota service (RLQS)")
	fmt.Fprintln(w, "over gRPC, POST /v1/check over HTTP, and the admin API. Reloads the config on change")
	fmt.Fprintln(w, "and on SIGHUP; drains and stops on SIGTERM or SIGINT. Without --config, it reads")
	fmt.Fprintln(w, "envoyproxy/ratelimit's environment (RUNTIME_ROOT, PORT, REDIS_URL, ...) and serves")
	fmt.Fprintln(w, "as that project does; see docs/deploy.md.")
	fmt.Fprintln(w)
	var c serveConfig
	printFlags(w, serveFlags(&c, w))
}

func runServe(args []string, stdout, stderr io.Writer) int {
	if _, set := os.LookupEnv("GOGC"); !set {
		// The service's heap is small (tens of MB) and churns with every
		// call: collecting at 5× the live heap instead of 2× halves the
		// collector's CPU for a few MB more. GOGC overrides it.
		debug.SetGCPercent(400)
	}
	c := serveConfig{reference: true}
	return runApp("serve", serveFlags(&c, stderr), &c, args, stderr, startService)
}

// serveOptions are the parsed forms of serveConfig's strings.
type serveOptions struct {
	level         slog.Level
	headers       header.Mode
	envoyHeaders  header.Mode // RLS answers for domains in envoyproxy/ratelimit's format
	policy        bouncer.StoreErrorPolicy
	mode          bouncer.Mode
	peers         map[string]rueidis.ClientOption // the other regions' Redis (--region-peers)
	rejectUnknown bool
	redis         *rueidis.ClientOption // nil: the memory store
	redisTLS      *redisstore.TLSFiles  // nil: no TLS, or rediss:// verified against the system's roots
	apiToken      bearer.Token          // the JSON API's; the zero Token: none
	adminToken    bearer.Token          // the admin API's writes'
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
	o.headers, o.envoyHeaders = header.All, header.Off
	if c.headers != "" {
		mode, ok := header.ParseMode(c.headers)
		if !ok {
			return o, fmt.Errorf("--headers: want all, ietf, x-ratelimit or off, got %q", c.headers)
		}
		o.headers, o.envoyHeaders = mode, mode
	}
	p, err := bouncer.ParseStoreErrorPolicy(c.onStoreError)
	if err != nil || p == bouncer.StoreErrorDefault {
		return o, fmt.Errorf("--on-store-error: want allow, deny or local, got %q", c.onStoreError)
	}
	o.policy = p
	if o.mode, err = bouncer.ParseMode(c.mode); err != nil {
		return o, fmt.Errorf("--mode: want strict, lease or async, got %q", c.mode)
	}
	switch c.unknownDomain {
	case "allow":
	case "error":
		o.rejectUnknown = true
	default:
		return o, fmt.Errorf("--unknown-domain: want allow or error, got %q", c.unknownDomain)
	}
	if c.otelSample < 0 || c.otelSample > 1 {
		return o, fmt.Errorf("--otel-sample-ratio: want 0 to 1, got %v", c.otelSample)
	}
	if c.adminKeys < 0 {
		return o, fmt.Errorf("--admin-keys: want 0 or more, got %d", c.adminKeys)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"store-timeout", c.storeTimeout}, {"shutdown-timeout", c.shutdownTimeout}, {"read-header-timeout", c.readHeaderTimeout}, {"read-timeout", c.readTimeout}, {"write-timeout", c.writeTimeout}, {"idle-timeout", c.idleTimeout}} {
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
	if o.apiToken, err = bearer.Load(c.apiTokenFile, "BOUNCER_API_TOKEN"); err != nil {
		return o, fmt.Errorf("--api-token-file: %v", strings.TrimPrefix(err.Error(), "bearer: "))
	}
	if o.adminToken, err = bearer.Load(c.adminTokenFile, "BOUNCER_ADMIN_TOKEN"); err != nil {
		return o, fmt.Errorf("--admin-token-file: %v", strings.TrimPrefix(err.Error(), "bearer: "))
	}
	if c.stateFile != "" && c.store != "memory" {
		return o, errors.New("--state-file: only with --store memory (Redis keeps its own state)")
	}
	if c.stateFile != "" && c.stateSaveInterval <= 0 {
		return o, fmt.Errorf("--state-save-interval: want a positive duration, got %v", c.stateSaveInterval)
	}
	if c.store != "memory" {
		if o.redis, o.redisTLS, err = c.redisOptions(); err != nil {
			return o, err
		}
	}
	if o.peers, err = c.regionOptions(); err != nil {
		return o, err
	}
	return o, nil
}

// regionOptions reads --region and --region-peers: the other regions'
// Redis options, by region name.
func (c serveConfig) regionOptions() (map[string]rueidis.ClientOption, error) {
	if c.region == "" {
		if c.regionPeers != "" {
			return nil, errors.New("--region-peers needs --region: the name of this instance's region")
		}
		return nil, nil
	}
	if c.store == "memory" {
		return nil, errors.New("--region needs a Redis --store: a region's instances share their counts in it")
	}
	if !validRegion(c.region) {
		return nil, fmt.Errorf("--region %q: want 1 to 32 letters, digits, '-' or '_'", c.region)
	}
	if c.regionTTL <= 0 {
		return nil, fmt.Errorf("--region-ttl: want a positive duration, got %v", c.regionTTL)
	}
	peers := map[string]rueidis.ClientOption{}
	for _, p := range strings.Fields(c.regionPeers) {
		name, url, ok := strings.Cut(p, "=")
		switch {
		case !ok || !validRegion(name):
			return nil, fmt.Errorf("--region-peers: want NAME=URL, NAME 1 to 32 letters, digits, '-' or '_', got %q", redactURL(p))
		case name == c.region:
			return nil, fmt.Errorf("--region-peers: %q is this instance's own region", name)
		}
		if _, dup := peers[name]; dup {
			return nil, fmt.Errorf("--region-peers: region %q named twice", name)
		}
		co, err := redisstore.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("--region-peers %s=%q: %v", name, redactURL(url), strings.TrimPrefix(err.Error(), "redisstore: "))
		}
		peers[name] = co
	}
	if len(peers) == 0 {
		return nil, errors.New("--region needs --region-peers: the other regions' Redis, as NAME=URL")
	}
	return peers, nil
}

func validRegion(s string) bool {
	return len(s) >= 1 && len(s) <= 32 && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	})
}

// redisOptions reads --store (a Redis URL), --store-client-name and the
// TLS flags (--store-tls-ca and the others).
func (c serveConfig) redisOptions() (*rueidis.ClientOption, *redisstore.TLSFiles, error) {
	if !strings.Contains(c.store, "://") {
		return nil, nil, fmt.Errorf("--store: want memory, or a redis:// or rediss:// URL, got %q", redactURL(c.store))
	}
	co, err := redisstore.ParseURL(c.store)
	if err != nil {
		return nil, nil, fmt.Errorf("--store %q: %v", redactURL(c.store), strings.TrimPrefix(err.Error(), "redisstore: "))
	}
	if n := c.storeClientName; n != "" {
		if strings.ContainsFunc(n, func(r rune) bool { return r < '!' || r > '~' }) {
			return nil, nil, fmt.Errorf("--store-client-name %q: Redis refuses spaces, newlines and other special characters in it", n)
		}
		co.ClientName, co.Sentinel.ClientName = n, n
	}
	f := c.storeTLS
	if f == (redisstore.TLSFiles{}) {
		return &co, nil, nil
	}
	switch {
	case co.TLSConfig == nil:
		return nil, nil, errors.New("--store-tls-ca and the other TLS flags need TLS: the --store URL is redis://, plain TCP; write rediss://")
	case (f.Cert == "") != (f.Key == ""):
		return nil, nil, errors.New("--store-tls-cert and --store-tls-key go together")
	case f.InsecureSkipVerify && f.CA != "":
		return nil, nil, errors.New("--store-tls-insecure-skip-verify: the CA of --store-tls-ca would not be checked; choose one")
	}
	return &co, &f, nil
}

// redactURL hides the passwords of a store URL, the master's and
// Sentinel's, before it is printed. It reads the URL by hand rather than
// with url.Parse, so that a URL too malformed to parse is hidden too.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		if user, _, ok := strings.Cut(rest[:at], ":"); ok {
			rest = user + ":xxxxx" + rest[at:]
		}
	}
	return scheme + "://" + sentinelPassword.ReplaceAllString(rest, "${1}xxxxx")
}

// sentinelPassword finds the value of a URL's sentinel_password option.
var sentinelPassword = regexp.MustCompile(`([?&]sentinel_password=)[^&#]*`)

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	ho := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// service is a running `bouncer serve`: the app, and the RLS and JSON
// API listeners.
type service struct {
	*app
	grpc     *grpc.Server
	health   *health.Server
	rlqs     *rlqs.Server
	httpSrv  *http.Server // nil without --http-addr
	grpcAddr string
	httpAddr string
}

// redisStreamWorkers is how many gRPC stream workers serve with a Redis
// store: as many calls as are commonly in flight at once, each waiting
// for its round trip (see grpcServer).
const redisStreamWorkers = 256

// startService loads the config, opens the store and the listeners, and
// starts serving; ctx ends the config watch.
func startService(ctx context.Context, c serveConfig, o serveOptions, log *slog.Logger) (*service, error) {
	a, err := openApp(ctx, c, o, log, c.config, rules.LoadOptions{Mode: o.mode})
	if err != nil {
		return nil, err
	}
	a.engine.Concurrent = o.redis != nil // a request's descriptors wait for one round trip, not one each
	a.engine.RejectUnknownDomains = o.rejectUnknown
	s := &service{app: a}
	if err := s.listen(o); err != nil {
		a.shutdown()
		return nil, err
	}
	listeners := []admin.Listener{{Name: "grpc", Addr: s.grpcAddr}}
	if s.httpAddr != "" {
		listeners = append(listeners, admin.Listener{Name: "http", Addr: s.httpAddr})
	}
	if err := a.serveAdmin(c.adminAddr, "serve", listeners, rlconfigEndpoint(a.engine)); err != nil {
		a.shutdown()
		return nil, err
	}
	a.watch(ctx)
	if c.ref != nil {
		c.ref.log(log, "grpc", s.grpcAddr, "http", s.httpAddr, "admin", a.adminAddr, "store", redactURL(c.store), "config", c.config)
	}
	log.Info("serving", "grpc", s.grpcAddr, "http", s.httpAddr, "admin", a.adminAddr,
		"store", redactURL(c.store), "config", c.config, "version", a.engine.Config().Version)
	return s, nil
}

// listen serves RLS and RLQS (with gRPC health and reflection) and, with
// --http-addr, the JSON API.
func (s *service) listen(o serveOptions) error {
	c := s.c
	gl, err := listen(c.setting("grpc-addr"), c.grpcAddr, []admin.Listener{{Name: "http", Addr: c.httpAddr}, {Name: "admin", Addr: c.adminAddr}})
	if err != nil {
		return err
	}
	s.grpc = s.grpcServer(o)
	rlsServer := rls.New(s.engine, o.headers)
	rlsServer.EnvoyHeaders = &o.envoyHeaders
	rlsServer.DynamicMetadata = c.respMetadata
	jsonHandler := &jsonapi.Handler{Engine: s.engine, Headers: o.headers}
	if s.tracing {
		rlsServer.Tracer = otel.Tracer(rls.TracerName)
		jsonHandler.Tracer = otel.Tracer(jsonapi.TracerName)
	}
	rlsServer.Register(s.grpc)
	s.rlqs = &rlqs.Server{Engine: s.engine, Demands: s.store.demands, Log: s.log}
	s.rlqs.Register(s.grpc)
	s.reg.MustRegister(newRLQSCollector(s.rlqs))
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.grpcAddr = gl.Addr().String()
	s.serve(func() error { return s.grpc.Serve(gl) })
	s.drain = s.drainRLS
	if c.httpAddr == "" {
		return nil
	}
	hl, err := listen(c.setting("http-addr"), c.httpAddr, []admin.Listener{{Name: "grpc", Addr: s.grpcAddr}, {Name: "admin", Addr: c.adminAddr}})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/check", o.apiToken.Guard(jsonHandler, nil))
	mux.Handle("/v1/report", o.apiToken.Guard(jsonHandler.Report(), nil))
	mux.Handle("/json", o.apiToken.Guard(rlsServer.JSON(), nil))
	mux.Handle("/healthcheck", healthcheck(s.draining.Load))
	s.httpSrv = c.httpServer(mux)
	s.httpAddr = hl.Addr().String()
	s.serve(func() error { return s.httpSrv.Serve(hl) })
	return nil
}

// grpcServer is the RLS listener's server. Stream workers reuse
// goroutines (and their grown stacks) across calls instead of starting
// one per call. A call that finds every worker busy gets a goroutine of
// its own, which grows its stack again: with the memory store a call
// never waits, so one worker per CPU keeps up; with Redis each call
// waits a round trip, so as many workers as calls are commonly in
// flight.
func (s *service) grpcServer(o serveOptions) *grpc.Server {
	workers := uint32(runtime.GOMAXPROCS(0))
	if o.redis != nil {
		workers = max(workers, redisStreamWorkers)
	}
	return grpc.NewServer(grpc.MaxRecvMsgSize(1<<20), grpc.NumStreamWorkers(workers),
		grpc.ConnectionTimeout(s.c.readHeaderTimeout), grpc.MaxHeaderListSize(uint32(s.c.maxHeaderBytes)))
}

// drainRLS says NOT_SERVING to gRPC health checks, lets the calls in
// flight finish until ctx ends, and then cuts them.
func (s *service) drainRLS(ctx context.Context) {
	s.health.Shutdown()
	s.rlqs.Shutdown() // its streams never end of themselves
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
}
