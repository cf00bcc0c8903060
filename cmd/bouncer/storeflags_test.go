package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// --store and its --store-tls-* and --store-client-name flags, as
// validate reads them: what is accepted, and each refusal's message.
func TestStoreFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string // the error's text, or for an accepted store, its kind and addresses
	}{
		{"memory", nil, "memory"},
		{"standalone", []string{"--store", "redis://h:1"}, "redis h:1"},
		{"database", []string{"--store", "redis://h:1/2"}, "redis h:1 db 2"},
		{"cluster", []string{"--store", "redis://a:1,b:2"}, "redis cluster a:1,b:2"},
		{"sentinel", []string{"--store", "redis://s:1?master_set=m&addr=s:2"}, "redis sentinel s:1,s:2"},
		{"tls", []string{"--store", "rediss://h:1/0"}, "redis h:1 tls"},
		{"tls with files", []string{"--store", "rediss://h:1", "--store-tls-ca", "ca.pem", "--store-tls-cert", "c.pem", "--store-tls-key", "c.key", "--store-tls-server-name", "redis.internal"},
			"redis h:1 tls files"},
		{"client name", []string{"--store", "redis://h:1", "--store-client-name", "api-7"}, "redis h:1 name api-7"},
		{"no port", []string{"--store", "redis://localhost"}, `--store "redis://localhost": address "localhost" has no port: write localhost:6379 (6379 is Redis's default)`},
		{"not a URL", []string{"--store", "redis"}, `--store: want memory, or a redis:// or rediss:// URL, got "redis"`},
		{"bad scheme", []string{"--store", "mysql://h:1"}, `--store "mysql://h:1": URL scheme "mysql": want redis:// or rediss:// (TLS)`},
		{"unknown option", []string{"--store", "redis://h:1?timeout=1s"}, `--store "redis://h:1?timeout=1s": URL option "timeout": Bouncer reads only master_set, addr, sentinel_username, sentinel_password`},
		{"database on a cluster", []string{"--store", "redis://a:1,b:2/3"}, `--store "redis://a:1,b:2/3": database 3: a Cluster (several addresses) has only database 0`},
		{"tls flags on plain TCP", []string{"--store", "redis://h:1", "--store-tls-ca", "ca.pem"}, "--store-tls-ca and the other TLS flags need TLS: the --store URL is redis://, plain TCP; write rediss://"},
		{"cert without key", []string{"--store", "rediss://h:1", "--store-tls-cert", "c.pem"}, "--store-tls-cert and --store-tls-key go together"},
		{"insecure with a CA", []string{"--store", "rediss://h:1", "--store-tls-ca", "ca.pem", "--store-tls-insecure-skip-verify=true"},
			"--store-tls-insecure-skip-verify: the CA of --store-tls-ca would not be checked; choose one"},
		{"client name with a space", []string{"--store", "redis://h:1", "--store-client-name", "a b"}, `--store-client-name "a b": Redis refuses spaces`},
		{"passwords hidden", []string{"--store", "redis://u:hunter2@h:1?master_set=m&sentinel_password=hunter3&x=1"},
			`--store "redis://u:xxxxx@h:1?master_set=m&sentinel_password=xxxxx&x=1": URL option "x"`},
		{"passwords hidden in a URL that does not parse", []string{"--store", "redis://u:hunter2@a:1,b:x/%zz?sentinel_password=hunter3"},
			`--store "redis://u:xxxxx@a:1,b:x/%zz?sentinel_password=xxxxx": address "b:x": port "x"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c serveConfig
			if err := serveFlags(&c, io.Discard).Parse(append([]string{"--config", "c.yaml"}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			o, err := c.validate()
			got := ""
			switch {
			case err != nil:
				got = err.Error()
			default:
				got = storeKind(o.redis)
				if co := o.redis; co != nil {
					got += " " + strings.Join(co.InitAddress, ",")
					if co.SelectDB != 0 {
						got += " db " + string(rune('0'+co.SelectDB))
					}
					if co.TLSConfig != nil {
						got += " tls"
					}
					if o.redisTLS != nil {
						got += " files"
					}
					if co.ClientName == "api-7" {
						got += " name api-7"
					}
				}
			}
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "hunter") {
				t.Errorf("a password is printed: %q", got)
			}
		})
	}
}

// --region, --region-peers and --region-ttl, as validate reads them.
func TestRegionFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string // the error's text, or the peers accepted
	}{
		{"none", nil, ""},
		{"two peers", []string{"--store", "redis://h:1", "--region", "eu", "--region-peers", "us=redis://u:1  ap=rediss://a:2"}, "ap=a:2 us=u:1"},
		{"peers without a region", []string{"--store", "redis://h:1", "--region-peers", "us=redis://u:1"}, "--region-peers needs --region"},
		{"region on memory", []string{"--region", "eu", "--region-peers", "us=redis://u:1"}, "--region needs a Redis --store"},
		{"bad region", []string{"--store", "redis://h:1", "--region", "eu west", "--region-peers", "us=redis://u:1"}, `--region "eu west": want 1 to 32 letters`},
		{"no peers", []string{"--store", "redis://h:1", "--region", "eu"}, "--region needs --region-peers"},
		{"own region", []string{"--store", "redis://h:1", "--region", "eu", "--region-peers", "eu=redis://u:1"}, `--region-peers: "eu" is this instance's own region`},
		{"twice", []string{"--store", "redis://h:1", "--region", "eu", "--region-peers", "us=redis://u:1 us=redis://v:1"}, `--region-peers: region "us" named twice`},
		{"not NAME=URL", []string{"--store", "redis://h:1", "--region", "eu", "--region-peers", "redis://u:1"}, "--region-peers: want NAME=URL"},
		{"bad URL, password hidden", []string{"--store", "redis://h:1", "--region", "eu", "--region-peers", "us=redis://x:secret@u"}, `--region-peers us="redis://x:xxxxx@u": address "u" has no port`},
		{"bad ttl", []string{"--store", "redis://h:1", "--region", "eu", "--region-peers", "us=redis://u:1", "--region-ttl", "0s"}, "--region-ttl: want a positive duration"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c serveConfig
			if err := serveFlags(&c, io.Discard).Parse(append([]string{"--config", "c.yaml"}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			o, err := c.validate()
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				var peers []string
				for name, co := range o.peers {
					peers = append(peers, name+"="+strings.Join(co.InitAddress, ","))
				}
				slices.Sort(peers)
				got = strings.Join(peers, " ")
			}
			if !strings.HasPrefix(got, tt.want) || tt.want == "" && got != "" {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
