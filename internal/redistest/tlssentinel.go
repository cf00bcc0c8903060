package redistest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The users of every TLSSentinel set, as scripts/redis-sentinel.sh's: the
// sentinels' password is not the master's. These are test credentials on
// loopback, not secrets.
var tlsSentinelUsers = Sentinel{
	MasterSet: "bouncer",
	User:      "sentinel", Password: "bouncer-sentinel-test-password",
	MasterUser: "bouncer", MasterPassword: "bouncer-master-test-password",
}

// A TLSSentinel is a Sentinel set StartTLSSentinel started on loopback:
// a master, its replica and three sentinels, each on a TLS port only.
type TLSSentinel struct {
	*TLSServers          // Addrs are the data nodes', the first master at start
	Set         Sentinel // the sentinels' addresses, the master set and the users
}

// StartTLSSentinel makes certificates in dir and starts a Sentinel set
// that uses them, on free loopback ports above 20000, with no plain port
// (port 0): the replica and the sentinels talk TLS to the data nodes and
// to each other (tls-replication), presenting the server certificate.
// authClients is every server's tls-auth-clients: "yes" (the default,
// for ""), "optional" or "no". The data nodes and the sentinels refuse
// the default user and have users of their own, each with its own
// password (Set). It returns once the set is healthy (Healthy). Stop
// stops it.
func StartTLSSentinel(dir, authClients string) (*TLSSentinel, error) {
	if authClients == "" {
		authClients = "yes"
	}
	ts, err := newTLSServers(dir)
	if err != nil {
		return nil, err
	}
	s := &TLSSentinel{TLSServers: ts, Set: tlsSentinelUsers}
	ports, _ := freePorts(5, false)
	for i, p := range ports {
		addr := "127.0.0.1:" + strconv.Itoa(p)
		if i < 2 {
			ts.Addrs, ts.users[addr] = append(ts.Addrs, addr), [2]string{s.Set.MasterUser, s.Set.MasterPassword}
		} else {
			s.Set.Addrs, ts.users[addr] = append(s.Set.Addrs, addr), [2]string{s.Set.User, s.Set.Password}
		}
	}
	for i, p := range ports {
		conf := append(ts.nodeConf(p, 0, authClients), "tls-replication yes")
		var args []string
		switch i {
		case 0:
			conf = append(conf, s.dataConf()...)
		case 1:
			conf = append(append(conf, s.dataConf()...), "replicaof 127.0.0.1 "+strconv.Itoa(ports[0]))
		default:
			conf, args = append(conf, s.sentinelConf(ports[0], ports[1])...), []string{"--sentinel"}
		}
		if err := ts.launch(p, conf, args...); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if err := poll(s.Healthy); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// dataConf is the configuration of a data node beside nodeConf's.
func (s *TLSSentinel) dataConf() []string {
	return []string{
		"save \"\"", "appendonly no", "repl-diskless-sync yes", "repl-diskless-sync-delay 0",
		"user default off", "user " + s.Set.MasterUser + " on >" + s.Set.MasterPassword + " ~* &* +@all",
		// Both: after a failover the old master rejoins as a replica.
		"masteruser " + s.Set.MasterUser, "masterauth " + s.Set.MasterPassword,
	}
}

// sentinelConf is the configuration of a sentinel beside nodeConf's,
// monitoring the master on port master, whose replica is on port replica:
// known from the start, rather than from the master's INFO up to 10 s
// later, so that a failover finds it at once.
func (s *TLSSentinel) sentinelConf(master, replica int) []string {
	set := s.Set.MasterSet
	return []string{
		"user default off", "user " + s.Set.User + " on >" + s.Set.Password + " ~* &* +@all",
		"sentinel sentinel-user " + s.Set.User, "sentinel sentinel-pass " + s.Set.Password,
		"sentinel monitor " + set + " 127.0.0.1 " + strconv.Itoa(master) + " 2",
		"sentinel known-replica " + set + " 127.0.0.1 " + strconv.Itoa(replica),
		"sentinel auth-user " + set + " " + s.Set.MasterUser, "sentinel auth-pass " + set + " " + s.Set.MasterPassword,
		"sentinel down-after-milliseconds " + set + " 1000", "sentinel failover-timeout " + set + " 10000",
	}
}

// Master returns the master's address as the first sentinel that
// answers names it.
func (s *TLSSentinel) Master() (string, error) {
	var errs []error
	for _, a := range s.Set.Addrs {
		out, err := s.CLI(a, "sentinel", "get-master-addr-by-name", s.Set.MasterSet)
		if f := strings.Fields(out); err == nil && len(f) == 2 {
			return f[0] + ":" + f[1], nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %q %v", a, out, err))
	}
	return "", errors.Join(errs...)
}

// Healthy reports why the set is not healthy yet: one master with its
// replica in sync, and every sentinel naming that master and seeing the
// others and a quorum.
func (s *TLSSentinel) Healthy() error {
	master := ""
	for _, a := range s.Addrs {
		repl, err := s.CLI(a, "info", "replication")
		switch {
		case err == nil && strings.Contains(repl, "role:master") && strings.Contains(repl, "connected_slaves:1"):
			master = a
		case err == nil && strings.Contains(repl, "role:slave") && strings.Contains(repl, "master_link_status:up") &&
			strings.Contains(repl, "master_sync_in_progress:0"):
		default:
			return fmt.Errorf("%s: replication: %s %v", a, repl, err)
		}
	}
	if master == "" {
		return errors.New("no master")
	}
	for _, a := range s.Set.Addrs {
		out, err := s.CLI(a, "sentinel", "get-master-addr-by-name", s.Set.MasterSet)
		if f := strings.Fields(out); err != nil || len(f) != 2 || f[0]+":"+f[1] != master {
			return fmt.Errorf("sentinel %s names master %q, want %s (%v)", a, out, master, err)
		}
		if out, err := s.CLI(a, "sentinel", "ckquorum", s.Set.MasterSet); err != nil || !strings.HasPrefix(out, "OK 3 usable") {
			return fmt.Errorf("sentinel %s: ckquorum: %q %v", a, out, err)
		}
	}
	return nil
}

// Failover asks the first sentinel for a failover (SENTINEL FAILOVER):
// the replica takes over with both data nodes up. A replica that came
// back from a failover a moment ago is not yet good enough for the
// sentinels (NOGOODSLAVE): Failover asks again, for a bounded time.
func (s *TLSSentinel) Failover() error {
	var out string
	var cliErr error
	if err := poll(func() error {
		out, cliErr = s.CLI(s.Set.Addrs[0], "sentinel", "failover", s.Set.MasterSet)
		if cliErr == nil && strings.HasPrefix(out, "NOGOODSLAVE") {
			return errors.New(out)
		}
		return nil
	}); err != nil {
		return err
	}
	if cliErr != nil || out != "OK" {
		return fmt.Errorf("SENTINEL FAILOVER: %q %v", out, cliErr)
	}
	return nil
}
