package redistest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TLSOptions say how StartTLS configures its servers.
type TLSOptions struct {
	// Cluster starts a Cluster of 3 masters and 3 replicas, which talk
	// to each other over TLS (tls-cluster, tls-replication); otherwise
	// one standalone server.
	Cluster bool

	// Plain gives a standalone server a plain TCP port beside its TLS
	// one (PlainAddr).
	Plain bool

	// AuthClients is the servers' tls-auth-clients: "yes" (the default,
	// for ""), "optional" or "no".
	AuthClients string

	// TrustAlso, if not nil, is a CA whose client certificates the
	// servers accept too, beside those of Certs.CA.
	TrustAlso *CA
}

// TLSServers are redis-server processes StartTLS started on loopback.
type TLSServers struct {
	Addrs     []string // their TLS addresses: one, or the Cluster's six
	PlainAddr string   // with TLSOptions.Plain
	Certs     Certs    // the CA and the server's and a client's certificates
	dir       string
	caFile    string // the servers' tls-ca-cert-file
	procs     []*exec.Cmd
	users     map[string][2]string // by address: the ACL user and password CLI logs in as
}

const waitTLS = 30 * time.Second

// StartTLS makes certificates in dir and starts servers that use them,
// on free loopback ports above 20000, and waits until they answer (a
// Cluster: until it is healthy, replicas in sync). Stop stops them.
func StartTLS(dir string, o TLSOptions) (*TLSServers, error) {
	if o.AuthClients == "" {
		o.AuthClients = "yes"
	}
	s, err := newTLSServers(dir)
	if err != nil {
		return nil, err
	}
	if o.TrustAlso != nil {
		s.caFile = filepath.Join(dir, "trusted.pem")
		if err := os.WriteFile(s.caFile, append(append([]byte{}, s.Certs.CA.PEM...), o.TrustAlso.PEM...), 0o600); err != nil {
			return nil, err
		}
	}
	n := 1
	if o.Cluster {
		n = 6
	}
	ports, plain := freePorts(n, o.Plain)
	for _, p := range ports {
		s.Addrs = append(s.Addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	if o.Plain {
		s.PlainAddr = "127.0.0.1:" + strconv.Itoa(plain)
	}
	for i, p := range ports {
		pl := 0
		if i == 0 {
			pl = plain
		}
		conf := append(s.nodeConf(p, pl, o.AuthClients), "save \"\"", "appendonly no")
		if o.Cluster {
			conf = append(conf, "cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 2000",
				"cluster-require-full-coverage no", "tls-cluster yes", "tls-replication yes")
		}
		if err := s.launch(p, conf); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if err := s.waitUp(o.Cluster); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// newTLSServers makes dir and the certificates in it, once redis-server
// and redis-cli are found.
func newTLSServers(dir string) (*TLSServers, error) {
	for _, tool := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is not on PATH (scripts/redis-up.sh installs Redis)", tool)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	certs, err := WriteCerts(dir)
	if err != nil {
		return nil, err
	}
	return &TLSServers{Certs: certs, dir: dir, caFile: certs.CAFile, users: map[string][2]string{}}, nil
}

var (
	portsMu sync.Mutex
	given   = map[int]bool{}
)

// freePorts picks n consecutive TLS ports (and, for a Cluster, their
// bus ports, +10000) and a plain port that nothing listens on, from a
// random place above 20000.
func freePorts(n int, plain bool) (ports []int, plainPort int) {
	portsMu.Lock()
	defer portsMu.Unlock()
	free := func(p int) bool {
		if given[p] {
			return false
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		l.Close()
		return true
	}
	for {
		base := 20000 + 10*rand.IntN(1000) // bus ports up to 39999
		ok := true
		for i := range n {
			ok = ok && free(base+i) && (n == 1 || free(base+i+10000))
		}
		if plain {
			ok = ok && free(base+n)
		}
		if !ok {
			continue
		}
		for i := range n + 1 {
			given[base+i] = true
		}
		ports = make([]int, n)
		for i := range ports {
			ports[i] = base + i
		}
		if plain {
			plainPort = base + n
		}
		return ports, plainPort
	}
}

// nodeConf is the configuration every node has: its TLS port p (and
// plain port plain, if not 0), the certificates, and no persistence.
func (s *TLSServers) nodeConf(p, plain int, authClients string) []string {
	dir := filepath.Join(s.dir, strconv.Itoa(p))
	return []string{
		"bind 127.0.0.1", "protected-mode no", "port " + strconv.Itoa(plain), "tls-port " + strconv.Itoa(p),
		"tls-cert-file " + s.Certs.ServerCert, "tls-key-file " + s.Certs.ServerKey, "tls-ca-cert-file " + s.caFile,
		"tls-auth-clients " + authClients, "dir " + dir, "logfile " + filepath.Join(dir, "redis.log"),
	}
}

// launch starts the node of TLS port p with conf (redis-server's
// configuration file, args its extra arguments).
func (s *TLSServers) launch(p int, conf []string, args ...string) error {
	dir := filepath.Join(s.dir, strconv.Itoa(p))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cf := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(cf, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	cmd := exec.Command("redis-server", append([]string{cf}, args...)...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	s.procs = append(s.procs, cmd)
	return nil
}

// CLI runs redis-cli against the node of addr over TLS, with the
// client certificate (and, on a Sentinel set, the node's ACL user), and
// returns what it printed.
func (s *TLSServers) CLI(addr string, args ...string) (string, error) {
	host, port, _ := net.SplitHostPort(addr)
	all := []string{"--tls", "--cacert", s.Certs.CAFile, "--cert", s.Certs.ClientCert, "--key", s.Certs.ClientKey, "-h", host, "-p", port}
	if u, ok := s.users[addr]; ok {
		all = append(all, "--user", u[0], "--pass", u[1], "--no-auth-warning")
	}
	all = append(all, args...)
	out, err := exec.Command("redis-cli", all...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// waitUp waits until every node answers, then makes and waits for the
// Cluster.
func (s *TLSServers) waitUp(cluster bool) error {
	for _, a := range s.Addrs {
		if err := poll(func() error {
			if out, err := s.CLI(a, "ping"); err != nil || out != "PONG" {
				return fmt.Errorf("%s: ping: %q, %v", a, out, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if !cluster {
		return nil
	}
	args := append([]string{"--cluster", "create"}, s.Addrs...)
	if out, err := s.CLI(s.Addrs[0], append(args, "--cluster-replicas", "1", "--cluster-yes")...); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	return poll(s.clusterHealthy)
}

// clusterHealthy reports why the Cluster is not healthy yet: every node
// must see the Cluster ok, with three masters and three replicas in sync.
func (s *TLSServers) clusterHealthy() error {
	for _, a := range s.Addrs {
		info, err := s.CLI(a, "cluster", "info")
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:6") {
			return fmt.Errorf("%s: cluster info: %s %v", a, info, err)
		}
		repl, err := s.CLI(a, "info", "replication")
		if err != nil || (strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up")) ||
			(strings.Contains(repl, "role:master") && !strings.Contains(repl, "connected_slaves:1")) {
			return fmt.Errorf("%s: replication: %s %v", a, repl, err)
		}
	}
	return nil
}

// poll calls f until it succeeds, every 20ms, for waitTLS at most.
func poll(f func() error) error {
	deadline := time.Now().Add(waitTLS)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", waitTLS, err)
		}
		<-tick.C
	}
}

// Stop kills the servers and waits for them to exit.
func (s *TLSServers) Stop() {
	for _, c := range s.procs {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	s.procs = nil
}
