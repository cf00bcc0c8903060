package tlsreload_test

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/tlsreload"
)

func TestHTTP2(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	f := setup(t, ca, ca.server(t, time.Now().Add(time.Hour)), tlsreload.Config{}, inPlace)
	a, err := get(t, f.addr, clientConfig(ca, nil))
	if err != nil {
		t.Fatal(err)
	}
	if a.protoMajor != 2 {
		t.Errorf("got HTTP/%d, want HTTP/2", a.protoMajor)
	}
	for _, tt := range []struct {
		offer []string
		want  string
	}{
		{[]string{"h2", "http/1.1"}, "h2"},
		{[]string{"http/1.1"}, "http/1.1"},
		{nil, ""},
	} {
		t.Run(fmt.Sprintf("offer=%v", tt.offer), func(t *testing.T) {
			conf := clientConfig(ca, nil)
			conf.NextProtos = tt.offer
			conn, err := tls.Dial("tcp", f.addr, conf)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if got := conn.ConnectionState().NegotiatedProtocol; got != tt.want {
				t.Errorf("got ALPN %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClientAuth(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	other := newCA(t, "another CA", time.Now().Add(24*time.Hour))
	server := ca.server(t, time.Now().Add(time.Hour))
	signed, foreign := ca.client(t, "alice"), other.client(t, "mallory")
	for _, tt := range []struct {
		mode   string
		client *pair
		want   string // the verified client's name; "refused" when the request fails
	}{
		{"none", nil, ""},
		{"none", &signed, ""}, // not asked for, so not sent
		{"request", nil, ""},
		{"request", &signed, "alice"},
		{"request", &foreign, "refused"},
		{"require", nil, "refused"},
		{"require", &signed, "alice"},
		{"require", &foreign, "refused"},
	} {
		name := tt.mode + "/no cert"
		if tt.client != nil {
			name = tt.mode + "/" + tt.client.leaf.Subject.CommonName
		}
		t.Run(name, func(t *testing.T) {
			c := tlsreload.Config{ClientAuth: tt.mode}
			if tt.mode != "none" {
				c.ClientCAFile = "ca.pem"
			}
			f := setup(t, ca, server, c, inPlace)
			a, err := get(t, f.addr, clientConfig(ca, tt.client))
			got := a.body
			if err != nil {
				got = "refused"
				t.Logf("request: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A new client CA bundle applies to the next handshake: the clients of
// the CA it drops are refused, those of the CA it adds accepted.
func TestClientCAReload(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	next := newCA(t, "next CA", time.Now().Add(24*time.Hour))
	old, renewed := ca.client(t, "alice"), next.client(t, "alice-renewed")
	f := setup(t, ca, ca.server(t, time.Now().Add(time.Hour)), tlsreload.Config{ClientAuth: "require", ClientCAFile: "ca.pem"}, inPlace)
	check := func(conf *tls.Config, want string) answer {
		t.Helper()
		a, err := get(t, f.addr, conf)
		got := a.body
		if err != nil {
			got = "refused"
		}
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		return a
	}
	// Alice keeps her sessions, to try to resume one after the change.
	alice := clientConfig(ca, &old)
	alice.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	check(alice, "alice")
	if a := check(alice, "alice"); !a.resumed {
		t.Fatal("the second handshake did not resume the first's session; the test needs it to")
	}
	check(clientConfig(ca, &renewed), "refused")

	replace(t, f.caFile, next.pem)
	f.rec.wait(t, "the new client CA", func(r reload) bool { return r.err == nil })
	check(alice, "refused")
	check(clientConfig(ca, &old), "refused")
	check(clientConfig(ca, &renewed), "alice-renewed")

	writeFile(t, f.caFile, []byte("-----BEGIN CERTIFICATE-----\ntruncat"))
	if err := f.rec.rejected(t); !strings.Contains(err.Error(), "client CA file "+f.caFile) {
		t.Errorf("got error %q, want one naming the client CA file", err)
	}
	check(clientConfig(ca, &renewed), "alice-renewed")
}

func TestMinVersion(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	server := ca.server(t, time.Now().Add(time.Hour))
	for _, tt := range []struct {
		min       string
		clientMax uint16
		want      uint16 // 0: refused
	}{
		{"", tls.VersionTLS12, tls.VersionTLS12},
		{"", 0, tls.VersionTLS13},
		{"1.2", tls.VersionTLS11, 0},
		{"1.3", tls.VersionTLS12, 0},
		{"1.3", 0, tls.VersionTLS13},
	} {
		t.Run(fmt.Sprintf("min=%s/client max=%s", tt.min, tls.VersionName(tt.clientMax)), func(t *testing.T) {
			f := setup(t, ca, server, tlsreload.Config{MinVersion: tt.min}, inPlace)
			conf := clientConfig(ca, nil)
			conf.MinVersion, conf.MaxVersion = tls.VersionTLS10, tt.clientMax
			a, err := get(t, f.addr, conf)
			if err != nil && tt.want != 0 {
				t.Fatalf("request: %v", err)
			}
			if err == nil && a.version != tt.want {
				t.Errorf("got %s, want %s", tls.VersionName(a.version), tls.VersionName(tt.want))
			}
		})
	}
}
