package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// refVars are the environment variables envoyproxy/ratelimit reads (its
// settings), so that `bouncer serve` started with that project's
// environment can say which it read and which it ignored.
var refVars = strings.Fields(`HOST PORT DEBUG_HOST DEBUG_PORT GRPC_UDS GRPC_HOST GRPC_PORT
GRPC_MAX_CONNECTION_AGE GRPC_MAX_CONNECTION_AGE_GRACE GRPC_SERVER_USE_TLS GRPC_SERVER_TLS_CERT
GRPC_SERVER_TLS_KEY GRPC_CLIENT_TLS_CACERT GRPC_CLIENT_TLS_SAN LOG_LEVEL LOG_FORMAT CONFIG_TYPE
FORCE_START_WITHOUT_INITIAL_CONFIG CONFIG_GRPC_XDS_NODE_ID CONFIG_GRPC_XDS_NODE_METADATA
CONFIG_GRPC_XDS_SERVER_URL CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL
CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS CONFIG_GRPC_XDS_SERVER_USE_TLS CONFIG_GRPC_XDS_CLIENT_TLS_CERT
CONFIG_GRPC_XDS_CLIENT_TLS_KEY CONFIG_GRPC_XDS_SERVER_TLS_CACERT CONFIG_GRPC_XDS_SERVER_TLS_SAN
XDS_CLIENT_BACKOFF_INITIAL_INTERVAL XDS_CLIENT_BACKOFF_MAX_INTERVAL XDS_CLIENT_BACKOFF_RANDOM_FACTOR
XDS_CLIENT_BACKOFF_JITTER XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES USE_DOG_STATSD USE_DOG_STATSD_MOGRIFIERS
USE_STATSD STATSD_HOST STATSD_PORT EXTRA_TAGS STATS_FLUSH_INTERVAL DISABLE_STATS USE_PROMETHEUS
PROMETHEUS_ADDR PROMETHEUS_PATH PROMETHEUS_MAPPER_YAML PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS
RUNTIME_ROOT RUNTIME_SUBDIRECTORY RUNTIME_APPDIRECTORY RUNTIME_IGNOREDOTFILES RUNTIME_WATCH_ROOT
EXPIRATION_JITTER_MAX_SECONDS LOCAL_CACHE_SIZE_IN_BYTES NEAR_LIMIT_RATIO CACHE_KEY_PREFIX BACKEND_TYPE
STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT LIMIT_RESPONSE_HEADERS_ENABLED LIMIT_LIMIT_HEADER
LIMIT_REMAINING_HEADER LIMIT_RESET_HEADER HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED REDIS_SOCKET_TYPE
REDIS_TYPE REDIS_URL REDIS_POOL_SIZE REDIS_AUTH REDIS_TLS REDIS_TLS_CLIENT_CERT REDIS_TLS_CLIENT_KEY
REDIS_TLS_CACERT REDIS_TLS_SKIP_HOSTNAME_VERIFICATION REDIS_PIPELINE_WINDOW REDIS_PIPELINE_LIMIT
REDIS_CLUSTER_PIPELINE_PARALLELISM REDIS_PERSECOND REDIS_PERSECOND_SOCKET_TYPE REDIS_PERSECOND_TYPE
REDIS_PERSECOND_URL REDIS_PERSECOND_POOL_SIZE REDIS_PERSECOND_AUTH REDIS_PERSECOND_TLS
REDIS_SENTINEL_AUTH REDIS_PERSECOND_SENTINEL_AUTH REDIS_PERSECOND_PIPELINE_WINDOW
REDIS_PERSECOND_PIPELINE_LIMIT REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM
REDIS_HEALTH_CHECK_ACTIVE_CONNECTION REDIS_TIMEOUT REDIS_PERSECOND_TIMEOUT REDIS_POOL_ON_EMPTY_BEHAVIOR
REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR REDIS_STARTUP_INITIAL_INTERVAL REDIS_STARTUP_MAX_INTERVAL
REDIS_STARTUP_MAX_ELAPSED_TIME MEMCACHE_HOST_PORT MEMCACHE_MAX_IDLE_CONNS MEMCACHE_SRV
MEMCACHE_SRV_REFRESH MEMCACHE_TLS MEMCACHE_TLS_CLIENT_CERT MEMCACHE_TLS_CLIENT_KEY MEMCACHE_TLS_CACERT
MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION SHADOW_MODE QUOTA_MODE RESPONSE_DYNAMIC_METADATA
MERGE_DOMAIN_CONFIG TRACING_ENABLED TRACING_SERVICE_NAME TRACING_SERVICE_NAMESPACE
TRACING_SERVICE_INSTANCE_ID TRACING_EXPORTER_PROTOCOL TRACING_SAMPLING_RATE`)

// refEnv is what `bouncer serve` read of envoyproxy/ratelimit's
// environment: the variables it read, and those set that it ignored
// (which it has no use for, or whose flag was given too).
type refEnv struct {
	read, ignored []string
	flags         map[string][]string // the flags set from them → the variables set that gave each
}

// setting names flag as an error names it: "--http-addr", and the
// variables that gave it when envoyproxy/ratelimit's environment did
// ("--http-addr (from HOST, PORT)"), so that an operator knows what to
// change.
func (c serveConfig) setting(flag string) string {
	if c.ref != nil && len(c.ref.flags[flag]) > 0 {
		return "--" + flag + " (from " + strings.Join(c.ref.flags[flag], ", ") + ")"
	}
	return "--" + flag
}

// log writes the one line that names them, with attrs (where it
// serves: at that project's default LOG_LEVEL, warn, it is the only line
// a start logs).
func (r *refEnv) log(log *slog.Logger, attrs ...any) {
	log.Warn("started with envoyproxy/ratelimit's environment (no --config): see docs/deploy.md",
		append([]any{"read", strings.Join(r.read, ","), "ignored", strings.Join(r.ignored, ",")}, attrs...)...)
}

// refMapping is one of serve's flags and the variables of
// envoyproxy/ratelimit's it is made from. value returns the flag's value,
// or ok false when the variables do not apply (they are then ignored).
// flag "" marks variables Bouncer honours by how it works, when value
// says ok.
type refMapping struct {
	flag  string
	vars  []string
	value func(env map[string]string) (v string, ok bool, err error)
}

var refMappings = []refMapping{
	{"config", []string{"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}, func(env map[string]string) (string, bool, error) {
		return filepath.Join(or(env["RUNTIME_ROOT"], "/srv/runtime_data/current"), env["RUNTIME_SUBDIRECTORY"],
			or(env["RUNTIME_APPDIRECTORY"], "config")), true, nil
	}},
	// The config directory's files are read, dot names skipped, and the
	// ConfigMap's ..data swap reloads them: the behaviour of
	// RUNTIME_WATCH_ROOT either way and of RUNTIME_IGNOREDOTFILES=true.
	{"", []string{"RUNTIME_WATCH_ROOT"}, func(map[string]string) (string, bool, error) { return "", true, nil }},
	{"", []string{"RUNTIME_IGNOREDOTFILES"}, func(env map[string]string) (string, bool, error) {
		b, err := strconv.ParseBool(env["RUNTIME_IGNOREDOTFILES"])
		return "", err == nil && b, nil
	}},
	{"http-addr", []string{"HOST", "PORT"}, hostPort("HOST", "PORT", "8080")},
	{"grpc-addr", []string{"GRPC_HOST", "GRPC_PORT"}, hostPort("GRPC_HOST", "GRPC_PORT", "8081")},
	{"admin-addr", []string{"DEBUG_HOST", "DEBUG_PORT"}, hostPort("DEBUG_HOST", "DEBUG_PORT", "6070")},
	{"log-level", []string{"LOG_LEVEL"}, func(env map[string]string) (string, bool, error) {
		switch l := strings.ToLower(or(env["LOG_LEVEL"], "warn")); l {
		case "trace", "debug":
			return "debug", true, nil
		case "warning", "warn", "info", "error":
			return strings.TrimSuffix(l, "ing"), true, nil
		case "fatal", "panic":
			return "error", true, nil
		default:
			return "", false, fmt.Errorf("LOG_LEVEL=%q: want trace, debug, info, warn, error, fatal or panic", env["LOG_LEVEL"])
		}
	}},
	{"log-format", []string{"LOG_FORMAT"}, func(env map[string]string) (string, bool, error) {
		if strings.EqualFold(env["LOG_FORMAT"], "json") {
			return "json", true, nil
		}
		return "text", true, nil
	}},
	{"store", []string{"REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_URL", "REDIS_AUTH", "REDIS_TLS", "REDIS_SENTINEL_AUTH"}, refStore},
	{"store-tls-ca", []string{"REDIS_TLS_CACERT"}, tlsFile("REDIS_TLS_CACERT")},
	{"store-tls-cert", []string{"REDIS_TLS_CLIENT_CERT"}, tlsFile("REDIS_TLS_CLIENT_CERT")},
	{"store-tls-key", []string{"REDIS_TLS_CLIENT_KEY"}, tlsFile("REDIS_TLS_CLIENT_KEY")},
	{"response-metadata", []string{"RESPONSE_DYNAMIC_METADATA"}, func(env map[string]string) (string, bool, error) {
		b, err := strconv.ParseBool(or(env["RESPONSE_DYNAMIC_METADATA"], "false"))
		if err != nil {
			return "", false, fmt.Errorf("RESPONSE_DYNAMIC_METADATA=%q: want true or false", env["RESPONSE_DYNAMIC_METADATA"])
		}
		return strconv.FormatBool(b), true, nil
	}},
}

// refRefused are settings of envoyproxy/ratelimit's that would change
// what is decided, or where, if Bouncer ignored them: it refuses to start
// with them, saying what to do instead.
var refRefused = []struct {
	name string
	set  func(v string) bool
	fix  string
}{
	{"BACKEND_TYPE", func(v string) bool { return !strings.EqualFold(v, "redis") && v != "" }, "Bouncer counts in Redis (REDIS_URL) or in memory (--store memory)"},
	{"CONFIG_TYPE", func(v string) bool { return !strings.EqualFold(v, "file") && v != "" }, "Bouncer reads its config from files: mount it under RUNTIME_ROOT, or give --config"},
	{"SHADOW_MODE", isTrue, "Bouncer has no process-wide shadow mode: set shadow_mode: true on the config's descriptors"},
	{"GRPC_SERVER_USE_TLS", isTrue, "Bouncer's gRPC listener is plain TCP: terminate TLS in front of it (the mesh's sidecar)"},
	{"GRPC_UDS", func(v string) bool { return v != "" }, "Bouncer's gRPC listener is TCP: unset it, and set GRPC_HOST and GRPC_PORT"},
}

func isTrue(v string) bool { b, _ := strconv.ParseBool(v); return b }

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func hostPort(hostVar, portVar, port string) func(map[string]string) (string, bool, error) {
	return func(env map[string]string) (string, bool, error) {
		p := or(env[portVar], port)
		if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
			return "", false, fmt.Errorf("%s=%q: want a port number", portVar, p)
		}
		return net.JoinHostPort(or(env[hostVar], "0.0.0.0"), p), true, nil
	}
}

// tlsFile maps a TLS file of envoyproxy/ratelimit's, which counts only
// with REDIS_TLS=true.
func tlsFile(name string) func(map[string]string) (string, bool, error) {
	return func(env map[string]string) (string, bool, error) {
		return env[name], env[name] != "" && isTrue(env["REDIS_TLS"]), nil
	}
}

// refStore is the --store URL of envoyproxy/ratelimit's Redis variables:
// REDIS_URL is host:port (SINGLE), host:port,host:port... (CLUSTER) or
// master,sentinel:port,... (SENTINEL, by REDIS_TYPE); REDIS_AUTH the
// password, or user:password; REDIS_TLS=true makes it rediss://. A
// REDIS_URL that is a redis:// or rediss:// URL is taken as it is.
func refStore(env map[string]string) (string, bool, error) {
	addr := env["REDIS_URL"]
	if addr == "" {
		return "", false, errors.New("REDIS_URL is unset, and its default, the unix socket of a local nutcracker, is not one Bouncer dials: set REDIS_SOCKET_TYPE=tcp and REDIS_URL=host:port, or give --store (memory for one instance)")
	}
	if s := env["REDIS_SOCKET_TYPE"]; s != "" && !strings.EqualFold(s, "tcp") {
		return "", false, fmt.Errorf("REDIS_SOCKET_TYPE=%q: Bouncer dials Redis over TCP: set REDIS_SOCKET_TYPE=tcp and REDIS_URL=host:port", s)
	}
	if strings.HasPrefix(addr, "redis://") || strings.HasPrefix(addr, "rediss://") {
		return addr, true, nil // already Bouncer's form
	}
	tls, err := strconv.ParseBool(or(env["REDIS_TLS"], "false"))
	if err != nil {
		return "", false, fmt.Errorf("REDIS_TLS=%q: want true or false", env["REDIS_TLS"])
	}
	scheme := "redis://"
	if tls {
		scheme = "rediss://"
	}
	if a := env["REDIS_AUTH"]; a != "" {
		user, pass, ok := strings.Cut(a, ":")
		if !ok {
			user, pass = "", a
		}
		scheme += url.UserPassword(user, pass).String() + "@"
	}
	addrs := strings.Split(addr, ",")
	for i := range addrs {
		addrs[i] = strings.TrimSpace(addrs[i])
	}
	switch t := strings.ToLower(or(env["REDIS_TYPE"], "single")); t {
	case "single", "cluster":
		if t == "single" && len(addrs) > 1 {
			return "", false, fmt.Errorf("REDIS_URL: one host:port with REDIS_TYPE=SINGLE, got %d; set REDIS_TYPE=CLUSTER for a Cluster", len(addrs))
		}
		return scheme + strings.Join(addrs, ","), true, nil
	case "sentinel":
		if len(addrs) < 2 {
			return "", false, errors.New("REDIS_URL: with REDIS_TYPE=SENTINEL, want master-name,sentinel-host:port[,sentinel-host:port...]")
		}
		q := "?master_set=" + url.QueryEscape(addrs[0])
		for _, a := range addrs[2:] {
			q += "&addr=" + url.QueryEscape(a)
		}
		if p := env["REDIS_SENTINEL_AUTH"]; p != "" {
			q += "&sentinel_password=" + url.QueryEscape(p)
		}
		return scheme + addrs[1] + q, true, nil
	default:
		return "", false, fmt.Errorf("REDIS_TYPE=%q: want SINGLE, CLUSTER or SENTINEL", env["REDIS_TYPE"])
	}
}

// readReference reads envoyproxy/ratelimit's environment (through
// lookup) into the flags of fs that neither the command line nor a
// BOUNCER_* variable set, when neither gave --config and one of that
// project's variables is set: a start that would otherwise fail for want
// of --config serves as that project does. It also turns
// --reference-metrics on, unless given.
func (c *serveConfig) readReference(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name := range c.envSet {
		given[name] = true
	}
	env := map[string]string{}
	for _, name := range refVars {
		if v, ok := lookup(name); ok {
			env[name] = v
		}
	}
	if given["config"] || len(env) == 0 {
		return nil
	}
	if err := refuseReference(env); err != nil {
		return err
	}
	r := &refEnv{flags: map[string][]string{}}
	used := map[string]bool{}
	for _, m := range refMappings {
		if m.flag != "" && given[m.flag] {
			continue // Bouncer's own flag wins; its variables are ignored
		}
		v, ok, err := m.value(env)
		if err != nil {
			return fmt.Errorf("envoyproxy/ratelimit's environment (read for want of --config): %v", err)
		}
		if !ok {
			continue
		}
		if m.flag != "" {
			if err := fs.Set(m.flag, v); err != nil {
				return fmt.Errorf("envoyproxy/ratelimit's environment: --%s %q: %v", m.flag, v, err)
			}
		}
		for _, name := range m.vars {
			used[name] = true
			if _, set := env[name]; set && m.flag != "" {
				r.flags[m.flag] = append(r.flags[m.flag], name)
			}
		}
	}
	if !given["reference-metrics"] {
		c.refMetrics = true
	}
	for name := range env {
		if used[name] {
			r.read = append(r.read, name)
		} else {
			r.ignored = append(r.ignored, name)
		}
	}
	slices.Sort(r.read)
	slices.Sort(r.ignored)
	c.ref = r
	return nil
}

func refuseReference(env map[string]string) error {
	for _, r := range refRefused {
		if v, ok := env[r.name]; ok && r.set(v) {
			return fmt.Errorf("envoyproxy/ratelimit's environment (read for want of --config): %s=%s: %s", r.name, v, r.fix)
		}
	}
	return nil
}
