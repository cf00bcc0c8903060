package refsvc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
)

const (
	gubernatorModule = "github.com/gubernator-io/gubernator/v2"
	gubernatorPkg    = gubernatorModule + "/cmd/gubernator"
)

// ErrNoGubernator is returned by Gubernator.Start and StartCluster in a
// build without -tags gubernator.
var ErrNoGubernator = errors.New("refsvc: gubernator: built without -tags gubernator")

// gubernatorHealthy asks the node at addr, with gubernator's own gRPC
// client, whether it is healthy with at least peers peers (itself among
// them). It is nil unless the package is built with -tags gubernator
// (gubernator_health.go sets it): that client's module brings some 300
// packages (Kubernetes' and etcd's clients among them) that nothing else
// here needs, so a default build leaves it out.
var gubernatorHealthy func(ctx context.Context, addr string, peers int) error

// Gubernator configures gubernator nodes, one (Start) or a cluster
// (StartCluster), which keep their limits in memory and speak their own
// gRPC API (pb.gubernator.V1), not Envoy's. The zero value is a node with
// gubernator's defaults.
type Gubernator struct {
	// CacheSize bounds how many rate limits each node holds
	// (GUBER_CACHE_SIZE); 0 means gubernator's default, 50 000.
	CacheSize int

	// Env adds environment variables (KEY=value) to every node,
	// overriding StartCluster's settings: see config.go and example.conf in gubernator's module.
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
// its one peer: StartCluster with one node.
func (g Gubernator) Start(ctx context.Context) (*Server, error) {
	nodes, err := g.StartCluster(ctx, 1)
	if err != nil {
		return nil, err
	}
	return nodes[0], nil
}

// StartCluster builds gubernator if needed, starts a cluster of n nodes,
// and returns them once every node reports itself healthy with n peers.
// The nodes discover each other with a member list whose one known node
// is the first node (which knows only itself: with no peers at all,
// gubernator can place no key), trace to no exporter, and log at warning
// level. Rate limits with behaviour GLOBAL are answered by whichever node
// is asked, which tells the key's owner of the hits in the background;
// on one node GLOBAL changes nothing. It needs a build with -tags
// gubernator, and returns ErrNoGubernator without one. On failure it
// stops the nodes it started.
//
// A node is started on free ports of a loopback address of its own,
// 127.0.0.1 for the first, 127.0.0.2 for the second, and so on, and with
// more than one node each runs with a host name of its own,
// gubernator-<i>, in a UTS namespace of its own (unshare --user
// --map-root-user --uts): gubernator's member list keeps one peer per IP
// address, and memberlist names a node after its host, refusing a second
// node of the same name. Either alone leaves every node with one peer.
// A cluster of more than one node thus needs Linux with user namespaces
// (or root), where all of 127.0.0.0/8 is loopback.
func (g Gubernator) StartCluster(ctx context.Context, n int) ([]*Server, error) {
	if gubernatorHealthy == nil {
		return nil, ErrNoGubernator
	}
	if n < 1 || n > 254 {
		return nil, fmt.Errorf("refsvc: a gubernator cluster of %d nodes", n)
	}
	path, err := g.Binary(ctx)
	if err != nil {
		return nil, err
	}
	var unshare string
	if n > 1 {
		if unshare, err = exec.LookPath("unshare"); err != nil {
			return nil, fmt.Errorf("refsvc: a gubernator cluster needs unshare (Linux), to give each node a host name of its own: %w", err)
		}
	}
	var nodes []*Server
	stop := func() {
		for _, s := range nodes {
			s.Stop()
		}
	}
	var known string // the first node's member list address
	for i := range n {
		ip := "127.0.0." + strconv.Itoa(i+1)
		ports, err := freePortsOn(ip, 3)
		if err != nil {
			stop()
			return nil, err
		}
		addr, member := hostPort(ip, ports[0]), hostPort(ip, ports[2])
		if i == 0 {
			known = member
		}
		env := []string{
			"GUBER_GRPC_ADDRESS=" + addr,
			"GUBER_ADVERTISE_ADDRESS=" + addr,
			"GUBER_HTTP_ADDRESS=" + hostPort(ip, ports[1]),
			"GUBER_PEER_DISCOVERY_TYPE=member-list",
			"GUBER_MEMBERLIST_ADDRESS=" + member,
			"GUBER_MEMBERLIST_BIND_ADDRESS=" + member,
			"GUBER_MEMBERLIST_KNOWN_NODES=" + known,
			"GUBER_LOG_LEVEL=warn",
			"OTEL_TRACES_EXPORTER=none",
		}
		if g.CacheSize > 0 {
			env = append(env, "GUBER_CACHE_SIZE="+strconv.Itoa(g.CacheSize))
		}
		env = append(env, g.Env...)
		bin, args := path, []string(nil)
		if n > 1 {
			// unshare and sh exec in place: the process started is the
			// node's, which Stop kills.
			bin = unshare
			args = []string{"--user", "--map-root-user", "--uts", "sh", "-c", `hostname "$0" && exec "$1"`,
				"gubernator-" + strconv.Itoa(i+1), path}
		}
		// Each node is ready once it serves with itself as a peer; the
		// last once every node sees all n.
		ready := func(ctx context.Context) error { return gubernatorHealthy(ctx, addr, 1) }
		if i == n-1 {
			ready = func(ctx context.Context) error {
				for _, a := range append(addrsOf(nodes), addr) {
					if err := gubernatorHealthy(ctx, a, n); err != nil {
						return fmt.Errorf("%s: %w", a, err)
					}
				}
				return nil
			}
		}
		s, err := spawn(ctx, "gubernator", addr, bin, args, env, nil, ready)
		if err != nil {
			stop()
			return nil, err
		}
		nodes = append(nodes, s)
	}
	return nodes, nil
}

func addrsOf(servers []*Server) []string {
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr)
	}
	return addrs
}
