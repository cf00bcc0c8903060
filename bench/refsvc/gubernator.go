package refsvc

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
)

const (
	gubernatorModule = "github.com/gubernator-io/gubernator/v2"
	gubernatorPkg    = gubernatorModule + "/cmd/gubernator"
)

// ErrNoGubernator is returned by Gubernator.Start in a build without
// -tags gubernator.
var ErrNoGubernator = errors.New("refsvc: gubernator: built without -tags gubernator")

// gubernatorHealthy asks the node at addr, with gubernator's own gRPC
// client, whether it is healthy with itself as a peer. It is nil unless
// the package is built with -tags gubernator (gubernator_health.go sets
// it): that client's module brings some 300 packages (Kubernetes' and
// etcd's clients among them) that nothing else here needs, so a default
// build leaves it out.
var gubernatorHealthy func(ctx context.Context, addr string) error

// Gubernator configures a single gubernator node, which keeps its limits
// in memory and speaks its own gRPC API (pb.gubernator.V1), not Envoy's.
// The zero value is a node with gubernator's defaults.
type Gubernator struct {
	// CacheSize bounds how many rate limits the node holds
	// (GUBER_CACHE_SIZE); 0 means gubernator's default, 50 000.
	CacheSize int

	// Env adds environment variables (KEY=value), overriding Start's
	// settings: see config.go and example.conf in gubernator's module.
	Env []string
}

// Binary returns the path of gubernator's daemon, building it the first
// time with go install <pkg>@<version>, at the version the bench module
// requires but with the dependencies of gubernator's own go.mod (see the
// package documentation for why).
func (Gubernator) Binary(ctx context.Context) (string, error) {
	return binary(ctx, "gubernator", func(ctx context.Context, dir, bin string) (string, error) {
		v, err := moduleVersion(ctx, dir, gubernatorModule)
		if err != nil {
			return "", err
		}
		gobin := filepath.Join(bin, "gubernator-"+v)
		if _, err := goCmd(ctx, dir, []string{"GOBIN=" + gobin, "GOWORK=off"}, "install", gubernatorPkg+"@"+v); err != nil {
			return "", err
		}
		return filepath.Join(gobin, "gubernator"), nil
	})
}

// Start builds gubernator if needed, starts one node on free loopback
// ports, and returns once the node reports itself healthy with itself as
// its one peer. The node discovers its peers with a member list whose one
// known node is itself (with no peers at all, gubernator can place no
// key), traces to no exporter, and logs at warning level. It needs a
// build with -tags gubernator, and returns ErrNoGubernator without one.
func (g Gubernator) Start(ctx context.Context) (*Server, error) {
	if gubernatorHealthy == nil {
		return nil, ErrNoGubernator
	}
	path, err := g.Binary(ctx)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	addr, member := loopback(ports[0]), loopback(ports[2])
	env := []string{
		"GUBER_GRPC_ADDRESS=" + addr,
		"GUBER_ADVERTISE_ADDRESS=" + addr,
		"GUBER_HTTP_ADDRESS=" + loopback(ports[1]),
		"GUBER_PEER_DISCOVERY_TYPE=member-list",
		"GUBER_MEMBERLIST_ADDRESS=" + member,
		"GUBER_MEMBERLIST_BIND_ADDRESS=" + member,
		"GUBER_MEMBERLIST_KNOWN_NODES=" + member,
		"GUBER_LOG_LEVEL=warn",
		"OTEL_TRACES_EXPORTER=none",
	}
	if g.CacheSize > 0 {
		env = append(env, "GUBER_CACHE_SIZE="+strconv.Itoa(g.CacheSize))
	}
	env = append(env, g.Env...)
	return spawn(ctx, "gubernator", addr, path, nil, env, nil, func(ctx context.Context) error {
		return gubernatorHealthy(ctx, addr)
	})
}
