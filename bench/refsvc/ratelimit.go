package refsvc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// ratelimitPkg is envoyproxy/ratelimit's main package; its module's
// version is the one the bench module requires.
const (
	ratelimitModule = "github.com/envoyproxy/ratelimit"
	ratelimitPkg    = ratelimitModule + "/src/service_cmd"
)

// EnvoyRatelimit configures envoyproxy/ratelimit, the reference Envoy RLS
// v3 service, on Redis. The zero value is not usable: RedisAddrs and
// Config are required.
type EnvoyRatelimit struct {
	// RedisAddrs are the Redis servers: one standalone server, or with
	// Cluster set, any nodes of a Redis Cluster.
	RedisAddrs []string
	Cluster    bool

	// Config is the rate limit configuration: the YAML of one file of
	// envoyproxy/ratelimit's format (domain, descriptors).
	Config string

	// KeyPrefix is prepended to every Redis key the service writes
	// (CACHE_KEY_PREFIX). Empty means one of this process's own, unique
	// to each Start, so that counters never carry over between servers
	// sharing one Redis.
	KeyPrefix string

	// Env adds environment variables (KEY=value), overriding Start's
	// settings: see settings.go in envoyproxy/ratelimit's src/settings.
	Env []string
}

// Binary returns the path of envoyproxy/ratelimit's binary, building it
// the first time: go install at the version bench/go.mod pins, so that it
// is built from its own module with the dependencies its go.mod names,
// whatever versions Bouncer (and so the bench module) uses.
func (EnvoyRatelimit) Binary(ctx context.Context) (string, error) {
	return binary(ctx, "envoy-ratelimit", func(ctx context.Context, dir, bin string) (string, error) {
		v, err := moduleVersion(ctx, dir, ratelimitModule)
		if err != nil {
			return "", err
		}
		gobin := filepath.Join(bin, "envoy-ratelimit-"+v)
		if _, err := goCmd(ctx, dir, []string{"GOBIN=" + gobin, "GOWORK=off"}, "install", ratelimitPkg+"@"+v); err != nil {
			return "", err
		}
		return filepath.Join(gobin, "service_cmd"), nil
	})
}

// prefixes numbers the key prefixes Start makes up.
var prefixes atomic.Int64

// Start builds envoyproxy/ratelimit if needed, starts it on free loopback
// ports with the configuration in r, and returns once its gRPC API
// answers (the service loads its configuration before it listens). Its
// statistics are off, its logs at warning level, and its keys expire
// with their window (no expiration jitter), so that a benchmark's
// per-second keys do not pile up in a shared Redis.
func (r EnvoyRatelimit) Start(ctx context.Context) (*Server, error) {
	if len(r.RedisAddrs) == 0 {
		return nil, fmt.Errorf("refsvc: EnvoyRatelimit needs RedisAddrs")
	}
	if r.Config == "" {
		return nil, fmt.Errorf("refsvc: EnvoyRatelimit needs a Config")
	}
	path, err := r.Binary(ctx)
	if err != nil {
		return nil, err
	}
	// The configuration goes where the service's runtime loader finds it
	// when it does not watch a symlinked root:
	// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY/*.yaml.
	root, err := os.MkdirTemp("", "refsvc-ratelimit-")
	if err != nil {
		return nil, fmt.Errorf("refsvc: %w", err)
	}
	cleanup := func() { os.RemoveAll(root) }
	confDir := filepath.Join(root, "ratelimit", "config")
	err = os.MkdirAll(confDir, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(confDir, "config.yaml"), []byte(r.Config), 0o644)
	}
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("refsvc: writing the configuration: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		cleanup()
		return nil, err
	}
	prefix := r.KeyPrefix
	if prefix == "" {
		prefix = fmt.Sprintf("refsvc-%s-%d-%d_", strconv.FormatInt(time.Now().UnixNano(), 36), os.Getpid(), prefixes.Add(1))
	}
	redisType := "single"
	if r.Cluster {
		redisType = "cluster"
	}
	env := []string{
		"USE_STATSD=false",
		"DISABLE_STATS=true",
		"LOG_LEVEL=warn",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_TYPE=" + redisType,
		"REDIS_URL=" + strings.Join(r.RedisAddrs, ","),
		"CACHE_KEY_PREFIX=" + prefix,
		"EXPIRATION_JITTER_MAX_SECONDS=0",
		"RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1",
		"PORT=" + strconv.Itoa(ports[0]),
		"DEBUG_HOST=127.0.0.1",
		"DEBUG_PORT=" + strconv.Itoa(ports[1]),
		"GRPC_HOST=127.0.0.1",
		"GRPC_PORT=" + strconv.Itoa(ports[2]),
	}
	if r.Cluster {
		// The service's settings call a write flush window "required for
		// Redis Cluster mode" and recommend 150µs to 500µs.
		env = append(env, "REDIS_PIPELINE_WINDOW=150us")
	}
	env = append(env, r.Env...)
	addr := loopback(ports[2])
	return spawn(ctx, "envoy-ratelimit", addr, path, nil, env, cleanup, func(ctx context.Context) error {
		return grpcServing(ctx, addr)
	})
}
