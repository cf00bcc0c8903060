package redisstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/rueidis"
)

// urlOptions are the query options ParseURL reads; any other is refused
// by name, so that an option rueidis would read and the store would not
// honour (or one misspelt) is not silently dropped.
var urlOptions = []string{"master_set", "addr", "sentinel_username", "sentinel_password"}

// ParseURL reads a Redis URL into the options to connect a store with
// (Options.Client; Options.URL is read with it), starting from
// ClientOption's:
//
//	redis://[[user]:password@]host:port[/db]           one server
//	redis://[[user]:password@]host:port,host:port,...  a Cluster, found from any of its nodes
//	redis://[[user]:password@]host:port[/db]?master_set=NAME[&addr=host:port...]
//	                                                   Sentinel: the master of NAME, found from these Sentinels
//	rediss://...                                       any of these over TLS
//
// The user and password are the master's (AUTH, a Redis 6 ACL user with
// a user name); a Sentinel's own are the options sentinel_username and
// sentinel_password. db is a database number, 0 by default; a Cluster
// has only database 0, so a db with several addresses is refused (one
// address of a Cluster with a db fails to connect: Redis refuses SELECT
// in cluster mode). Every address needs its port: "redis://localhost" is
// refused, not taken for localhost:6379. With rediss://, the servers'
// certificates are verified against the system's roots, each under the
// host name it was dialled at (Sentinel's too); Options.TLS gives a CA
// bundle, a client certificate or a server name instead.
//
// It is rueidis.ParseURL's reading of these forms, with Bouncer's checks
// added: a query option other than the four above, a fragment, or any
// other scheme is refused with an error that names it. Errors never
// repeat the password.
func ParseURL(s string) (rueidis.ClientOption, error) {
	if err := checkAuthority(s); err != nil {
		return rueidis.ClientOption{}, err
	}
	u, err := url.Parse(s)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // without the URL, which may hold a password
		}
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL: %w", err)
	}
	hosts, q, db, err := checkURL(u)
	if err != nil {
		return rueidis.ClientOption{}, err
	}
	first := *u
	first.Host, first.Path, first.RawPath = hosts[0], "", "" // the database is read above
	ro, err := rueidis.ParseURL(first.String())
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL: %w", err)
	}
	co := ClientOption(hosts)
	if ro.Sentinel.MasterSet != "" {
		co.InitAddress = ro.InitAddress // the first address, then each addr=
	}
	co.Username, co.Password, co.SelectDB = ro.Username, ro.Password, db
	co.Sentinel.MasterSet = ro.Sentinel.MasterSet
	co.Sentinel.Username, co.Sentinel.Password = q.Get("sentinel_username"), q.Get("sentinel_password")
	if u.Scheme == "rediss" {
		// No ServerName: each connection verifies the host it dials,
		// which on a Cluster or behind Sentinel is a different one.
		co.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if co.Sentinel.MasterSet != "" {
			co.Sentinel.TLSConfig = co.TLSConfig
		}
	}
	return co, nil
}

// checkAuthority checks the addresses of a redis:// or rediss:// URL
// before url.Parse does, which would refuse a list of them whose last has
// no port with a message about the list.
func checkAuthority(s string) error {
	_, rest, ok := strings.Cut(s, "://")
	if !ok || (!strings.HasPrefix(s, "redis://") && !strings.HasPrefix(s, "rediss://")) {
		return nil
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	if rest == "" {
		return nil
	}
	for _, h := range strings.Split(rest, ",") {
		if err := checkAddr(h); err != nil {
			return err
		}
	}
	return nil
}

// checkURL checks what ParseURL refuses in u, and returns its addresses,
// its query and its database number.
func checkURL(u *url.URL) (hosts []string, q url.Values, db int, err error) {
	switch {
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return nil, nil, 0, fmt.Errorf("redisstore: URL scheme %q: want redis:// or rediss:// (TLS)", u.Scheme)
	case u.Opaque != "" || u.Host == "":
		return nil, nil, 0, errors.New("redisstore: URL has no host: want redis://host:port")
	case u.Fragment != "":
		return nil, nil, 0, fmt.Errorf("redisstore: URL fragment %q: a Redis URL has none", u.Fragment)
	}
	hosts = strings.Split(u.Host, ",")
	for _, h := range hosts {
		if err := checkAddr(h); err != nil {
			return nil, nil, 0, err
		}
	}
	if q, err = checkQuery(u.RawQuery); err != nil {
		return nil, nil, 0, err
	}
	if q.Has("master_set") && len(hosts) > 1 {
		return nil, nil, 0, errors.New("redisstore: with master_set, name more Sentinels with &addr=host:port, not with commas (commas list a Cluster's nodes)")
	}
	if db, err = checkDB(u.Path); err != nil {
		return nil, nil, 0, err
	}
	if db != 0 && len(hosts) > 1 {
		return nil, nil, 0, fmt.Errorf("redisstore: database %d: a Cluster (several addresses) has only database 0", db)
	}
	return hosts, q, db, nil
}

// checkAddr checks one host:port of a URL.
func checkAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	switch {
	case err != nil && strings.Contains(err.Error(), "missing port"):
		return fmt.Errorf("redisstore: address %q has no port: write %s (6379 is Redis's default)", a, net.JoinHostPort(strings.Trim(a, "[]"), "6379"))
	case err != nil:
		return fmt.Errorf("redisstore: address %q: %w", a, err)
	case host == "":
		return fmt.Errorf("redisstore: address %q has no host", a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("redisstore: address %q: port %q: want 1 to 65535", a, port)
	}
	return nil
}

// checkQuery parses a URL's query and refuses the options ParseURL does
// not read, and a Sentinel's options without master_set.
func checkQuery(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, errors.New("redisstore: URL query: malformed")
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(urlOptions, k) && k == "db":
			return nil, errors.New(`redisstore: URL option "db": give the database as the path, redis://host:port/2`)
		case !slices.Contains(urlOptions, k):
			return nil, fmt.Errorf("redisstore: URL option %q: Bouncer reads only %s", k, strings.Join(urlOptions, ", "))
		case k != "addr" && len(q[k]) > 1:
			return nil, fmt.Errorf("redisstore: URL option %q is given %d times", k, len(q[k]))
		case k == "addr":
			for _, a := range q[k] {
				if err := checkAddr(a); err != nil {
					return nil, err
				}
			}
		}
		if k != "master_set" && !q.Has("master_set") {
			return nil, fmt.Errorf("redisstore: URL option %q is for Sentinel: it needs master_set", k)
		}
	}
	if q.Has("master_set") && q.Get("master_set") == "" {
		return nil, errors.New("redisstore: URL option master_set is empty")
	}
	return q, nil
}

// checkDB reads the database number of a URL's path ("" or "/" is 0).
func checkDB(path string) (int, error) {
	p := strings.TrimPrefix(path, "/")
	if p == "" {
		return 0, nil
	}
	db, err := strconv.Atoi(p)
	if err != nil || db < 0 || strings.HasPrefix(p, "+") {
		return 0, fmt.Errorf("redisstore: URL path %q: want a database number, as in redis://host:port/2", path)
	}
	return db, nil
}

// DefaultClientName returns the name ClientOption gives every
// connection (CLIENT SETNAME, seen in CLIENT LIST):
// "bouncer-<host name>-<pid>", with any byte Redis would refuse in a name
// (a space, a control byte) as '-'.
func DefaultClientName() string { return defaultClientName() }

var defaultClientName = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return "bouncer-" + clientNameSafe(host) + "-" + strconv.Itoa(os.Getpid())
})

// clientNameSafe replaces the bytes Redis refuses in a client name.
func clientNameSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < '!' || c > '~' {
			b[i] = '-'
		}
	}
	return string(b)
}

// checkClientName reports whether Redis would refuse name in CLIENT
// SETNAME.
func checkClientName(name string) error {
	if name != clientNameSafe(name) {
		return fmt.Errorf("redisstore: client name %q: Redis refuses spaces, newlines and other special characters in it", name)
	}
	return nil
}
