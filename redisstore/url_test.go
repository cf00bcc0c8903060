package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/redisstore"
)

func TestParseURL(t *testing.T) {
	type want struct {
		addrs              string
		user, pass         string
		db                 int
		tls                bool
		master             string
		sentUser, sentPass string
		sentinelTLS        bool
	}
	for _, tt := range []struct {
		name, url string
		want      want
	}{
		{"standalone", "redis://h:6379", want{addrs: "h:6379"}},
		{"trailing slash", "redis://h:6379/", want{addrs: "h:6379"}},
		{"password", "redis://:pw@h:1", want{addrs: "h:1", pass: "pw"}},
		{"acl user", "redis://u:pw@h:1", want{addrs: "h:1", user: "u", pass: "pw"}},
		{"database", "redis://h:1/2", want{addrs: "h:1", db: 2}},
		{"ipv6", "redis://[::1]:6379", want{addrs: "[::1]:6379"}},
		{"cluster", "redis://a:1,b:2,c:3", want{addrs: "a:1,b:2,c:3"}},
		{"tls", "rediss://u:pw@h:6380/1", want{addrs: "h:6380", user: "u", pass: "pw", db: 1, tls: true}},
		{"tls cluster", "rediss://a:1,b:2", want{addrs: "a:1,b:2", tls: true}},
		{"sentinel", "redis://s1:26379?master_set=m", want{addrs: "s1:26379", master: "m"}},
		{"sentinels", "redis://u:pw@s1:26379/3?master_set=m&addr=s2:26379&addr=s3:26379",
			want{addrs: "s1:26379,s2:26379,s3:26379", user: "u", pass: "pw", db: 3, master: "m"}},
		{"sentinel acl", "rediss://u:pw@s1:26379?master_set=m&sentinel_username=su&sentinel_password=sp",
			want{addrs: "s1:26379", user: "u", pass: "pw", tls: true, master: "m", sentUser: "su", sentPass: "sp", sentinelTLS: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			co, err := redisstore.ParseURL(tt.url)
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.url, err)
			}
			got := want{
				addrs: strings.Join(co.InitAddress, ","), user: co.Username, pass: co.Password, db: co.SelectDB,
				tls: co.TLSConfig != nil, master: co.Sentinel.MasterSet,
				sentUser: co.Sentinel.Username, sentPass: co.Sentinel.Password, sentinelTLS: co.Sentinel.TLSConfig != nil,
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if co.TLSConfig != nil && (co.TLSConfig.ServerName != "" || co.TLSConfig.InsecureSkipVerify || co.TLSConfig.MinVersion == 0) {
				t.Errorf("TLS config: server name %q, insecure %v, min version %#x; want each address's host, verified, 1.2",
					co.TLSConfig.ServerName, co.TLSConfig.InsecureSkipVerify, co.TLSConfig.MinVersion)
			}
			if base := redisstore.ClientOption(nil); co.ClientName != base.ClientName || !co.DisableAutoPipelining || !co.DisableCache {
				t.Errorf("got client name %q, pipelining off %v, cache off %v; want ClientOption's", co.ClientName, co.DisableAutoPipelining, co.DisableCache)
			}
		})
	}
}

func TestParseURLRefuses(t *testing.T) {
	for _, tt := range []struct{ name, url, want string }{
		{"bad scheme", "http://h:1", `redisstore: URL scheme "http": want redis:// or rediss:// (TLS)`},
		{"unix", "unix:///tmp/redis.sock", `redisstore: URL scheme "unix": want redis:// or rediss:// (TLS)`},
		{"no scheme", "h:6379", `redisstore: URL scheme "h": want redis:// or rediss:// (TLS)`},
		{"no host", "redis://", "redisstore: URL has no host: want redis://host:port"},
		{"no port", "redis://localhost", `redisstore: address "localhost" has no port: write localhost:6379 (6379 is Redis's default)`},
		{"no port ipv6", "redis://[::1]", `redisstore: address "[::1]" has no port: write [::1]:6379 (6379 is Redis's default)`},
		{"no port in cluster", "redis://a:1,b", `redisstore: address "b" has no port: write b:6379`},
		{"bad port", "redis://h:0", `redisstore: address "h:0": port "0": want 1 to 65535`},
		{"no host in address", "redis://a:1,:2", `redisstore: address ":2" has no host`},
		{"database on a cluster", "redis://a:1,b:2/1", "redisstore: database 1: a Cluster (several addresses) has only database 0"},
		{"database not a number", "redis://h:1/x", `redisstore: URL path "/x": want a database number, as in redis://host:port/2`},
		{"negative database", "redis://h:1/-1", `redisstore: URL path "/-1": want a database number`},
		{"deep path", "redis://h:1/1/2", `redisstore: URL path "/1/2": want a database number`},
		{"db option", "redis://h:1?db=2", `redisstore: URL option "db": give the database as the path, redis://host:port/2`},
		{"unknown option", "redis://h:1?dial_timeout=1s", `redisstore: URL option "dial_timeout": Bouncer reads only master_set, addr, sentinel_username, sentinel_password`},
		{"skip verify", "rediss://h:1?skip_verify=true", `redisstore: URL option "skip_verify": Bouncer reads only`},
		{"client name option", "redis://h:1?client_name=x", `redisstore: URL option "client_name": Bouncer reads only`},
		{"addr without sentinel", "redis://h:1?addr=h:2", `redisstore: URL option "addr" is for Sentinel: it needs master_set`},
		{"sentinel password without sentinel", "redis://h:1?sentinel_password=x", `redisstore: URL option "sentinel_password" is for Sentinel: it needs master_set`},
		{"empty master set", "redis://h:1?master_set=", "redisstore: URL option master_set is empty"},
		{"master set twice", "redis://h:1?master_set=a&master_set=b", `redisstore: URL option "master_set" is given 2 times`},
		{"sentinel addr without port", "redis://h:1?master_set=m&addr=s2", `redisstore: address "s2" has no port`},
		{"sentinels with commas", "redis://a:1,b:2?master_set=m", "redisstore: with master_set, name more Sentinels with &addr=host:port, not with commas"},
		{"fragment", "redis://h:1#x", `redisstore: URL fragment "x": a Redis URL has none`},
		{"malformed", "redis://u:p%zz@h:1", "redisstore: URL: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redisstore.ParseURL(tt.url)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("ParseURL(%q): got error %v, want one starting %q", tt.url, err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}

// No error of ParseURL repeats a password, even one url.Parse refuses.
func TestParseURLHidesPasswords(t *testing.T) {
	for _, u := range []string{"redis://u:secret@h:1?x=1", "redis://u:secret@h", "redis://u:secret%zz@h:1", "http://u:secret@h:1"} {
		if _, err := redisstore.ParseURL(u); err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q): got error %v; want one without the password", u, err)
		}
	}
}

// The default client name names the process, in the bytes Redis accepts.
func TestDefaultClientName(t *testing.T) {
	name := redisstore.DefaultClientName()
	if !strings.HasPrefix(name, "bouncer-") || strings.ContainsAny(name, " \n\t") {
		t.Errorf("got %q, want bouncer-<host>-<pid> without spaces", name)
	}
	o := redisstore.Options{Client: redisstore.ClientOption([]string{"h:1"})}
	o.Client.ClientName = "two words"
	if _, err := redisstore.New(o); err == nil || !strings.Contains(err.Error(), `client name "two words"`) {
		t.Errorf("New with a client name Redis refuses: got %v, want an error naming it", err)
	}
}

// Options.URL connects the store to the Redis it names, as ParseURL reads
// it: a check decides in that Redis, not by policy.
func TestNewURL(t *testing.T) {
	s, err := redisstore.New(redisstore.Options{URL: "redis://" + addrs(t, "BOUNCER_REDIS_ADDR")[0], Prefix: freshPrefix(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer s.Close()
	l := bouncer.Limit{Name: "once", Algorithm: bouncer.FixedWindow, Rate: 1, Period: time.Hour}
	r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "url", Limits: []bouncer.Limit{l}}}, Cost: 1}
	for i, want := range []bool{true, false} {
		d, err := s.Check(context.Background(), r)
		if err != nil || d.Degraded || d.Allowed != want {
			t.Fatalf("check %d: got allowed %v, degraded %v, err %v; want allowed %v from Redis", i, d.Allowed, d.Degraded, err, want)
		}
	}
}

// New refuses a URL ParseURL refuses, both URL and Client, and neither,
// saying which.
func TestNewURLRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    redisstore.Options
		want string
	}{
		{"bad scheme", redisstore.Options{URL: "http://h:1"}, `"http"`},
		{"no port", redisstore.Options{URL: "redis://h"}, "port"},
		{"both", redisstore.Options{URL: "redis://h:1", Client: redisstore.ClientOption([]string{"h:1"})}, "both URL and Client"},
		{"neither", redisstore.Options{}, "set URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redisstore.New(tc.o)
			if err == nil {
				s.Close()
				t.Fatalf("got a store, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
