//go:build unix

package redisstore_test

import (
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/storetest"
)

// The TLS tests run against servers of their own, with certificates they
// make: a standalone server (with a plain port beside its TLS one, for
// the benchmark) and a Cluster of 3 masters and 3 replicas that talk TLS
// to each other, both requiring client certificates. Each starts the
// first time a test asks for it, and TestMain stops them at the end.
var tlsShared struct {
	mu      sync.Mutex
	dir     string
	servers map[bool]*redistest.TLSServers // by Cluster
	errs    map[bool]error
}

// sharedTLS returns the shared TLS standalone server, or Cluster.
func sharedTLS(t testing.TB, cluster bool) *redistest.TLSServers {
	t.Helper()
	failureRequireRedis(t)
	tlsShared.mu.Lock()
	defer tlsShared.mu.Unlock()
	if tlsShared.servers == nil {
		tlsShared.servers, tlsShared.errs = map[bool]*redistest.TLSServers{}, map[bool]error{}
	}
	if s, ok := tlsShared.servers[cluster]; ok {
		return s
	}
	if err := tlsShared.errs[cluster]; err != nil {
		t.Fatal(err)
	}
	if tlsShared.dir == "" {
		dir, err := os.MkdirTemp("", "bouncer-redis-tls-")
		if err != nil {
			t.Fatal(err)
		}
		tlsShared.dir = dir
	}
	name := "standalone"
	if cluster {
		name = "cluster"
	}
	s, err := redistest.StartTLS(filepath.Join(tlsShared.dir, name), redistest.TLSOptions{Cluster: cluster, Plain: !cluster})
	if err != nil {
		tlsShared.errs[cluster] = err
		t.Fatalf("starting a TLS %s: %v", name, err)
	}
	tlsShared.servers[cluster] = s
	return s
}

func stopTLSServers() {
	tlsShared.mu.Lock()
	defer tlsShared.mu.Unlock()
	for _, s := range tlsShared.servers {
		s.Stop()
	}
	if tlsShared.dir != "" {
		os.RemoveAll(tlsShared.dir)
	}
}

// tlsURL is a rediss:// URL of the servers' addresses.
func tlsURL(s *redistest.TLSServers) string { return "rediss://" + strings.Join(s.Addrs, ",") }

// mutualTLS are the files of a client the servers accept.
func mutualTLS(s *redistest.TLSServers) *redisstore.TLSFiles {
	return &redisstore.TLSFiles{CA: s.Certs.CAFile, Cert: s.Certs.ClientCert, Key: s.Certs.ClientKey}
}

// newURLStore makes a store that connects itself with the options of
// url and the TLS files f (nil: none), with a generous deadline unless
// o says otherwise, closed with t.
func newURLStore(t testing.TB, url string, f *redisstore.TLSFiles, o redisstore.Options) *redisstore.Store {
	t.Helper()
	co, err := redisstore.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	o.ClientOption, o.TLS = co, f
	if o.Prefix == "" {
		o.Prefix = freshPrefix()
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	s, err := redisstore.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitConnected fails t unless s connects within 30 s.
func waitConnected(t testing.TB, s *redisstore.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.WaitConnected(ctx); err != nil {
		t.Fatalf("not connected: %v; health: %v", err, s.Health().Degraded())
	}
}

// The conformance suite over mutual TLS, on a standalone server and on a
// Cluster whose nodes talk TLS among themselves.
func TestConformanceOverTLS(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		name := map[bool]string{false: "standalone", true: "cluster"}[cluster]
		t.Run(name, func(t *testing.T) {
			srv := sharedTLS(t, cluster)
			storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
				var o redisstore.Options
				redisstore.PinClock(&o, clock.Now)
				s := newURLStore(t, tlsURL(srv), mutualTLS(srv), o)
				waitConnected(t, s)
				return s
			})
		})
	}
}

// A client the server does not accept, or that does not accept the
// server, never connects: its checks decide by policy within their
// deadline, and the store says why.
func TestTLSRefused(t *testing.T) {
	srv := sharedTLS(t, false)
	c := srv.Certs
	for _, tt := range []struct {
		name  string
		files redisstore.TLSFiles
		want  string
	}{
		{"no client certificate", redisstore.TLSFiles{CA: c.CAFile}, "if it requires client certificates, tls-auth-clients, give one"},
		{"server's CA not trusted", redisstore.TLSFiles{Cert: c.ClientCert, Key: c.ClientKey}, "certificate signed by unknown authority"},
		{"server name not in its certificate", redisstore.TLSFiles{CA: c.CAFile, Cert: c.ClientCert, Key: c.ClientKey, ServerName: "redis.example"},
			"certificate is valid for localhost, not redis.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newURLStore(t, tlsURL(srv), &tt.files, redisstore.Options{Timeout: redisstore.DefaultTimeout})
			req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "k", Limits: []bouncer.Limit{{Algorithm: bouncer.GCRA, Rate: 10, Burst: 10, Period: time.Second}}}}, Cost: 1}
			d, err := s.Check(t.Context(), req)
			if err != nil || !d.Degraded || !d.Allowed {
				t.Fatalf("check: got %+v, %v; want allowed by the local policy, degraded", d, err)
			}
			h := s.Health()
			if h.Connected || h.ConnectError == nil || !strings.Contains(h.ConnectError.Error(), tt.want) {
				t.Errorf("health: connected %v, error %v; want not connected, an error saying %q", h.Connected, h.ConnectError, tt.want)
			}
		})
	}
}

// New refuses TLS files that do not load, naming the file and why.
func TestTLSFilesRefused(t *testing.T) {
	dir := t.TempDir()
	certs, err := redistest.WriteCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		files redisstore.TLSFiles
		want  string
	}{
		{"missing CA", redisstore.TLSFiles{CA: filepath.Join(dir, "none.pem")}, "redisstore: TLS: CA file " + filepath.Join(dir, "none.pem") + ": no such file or directory"},
		{"CA not PEM", redisstore.TLSFiles{CA: garbage}, "redisstore: TLS: CA file " + garbage + ": not PEM"},
		{"cert without key", redisstore.TLSFiles{Cert: certs.ClientCert}, "redisstore: TLS: Cert and Key go together"},
		{"key of another cert", redisstore.TLSFiles{Cert: certs.ClientCert, Key: certs.ServerKey},
			"redisstore: TLS: key file " + certs.ServerKey + " does not match cert file " + certs.ClientCert},
		{"insecure with a CA", redisstore.TLSFiles{CA: certs.CAFile, InsecureSkipVerify: true}, "redisstore: TLS: InsecureSkipVerify with a CA"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			co, _ := redisstore.ParseURL("rediss://127.0.0.1:1")
			_, err := redisstore.New(redisstore.Options{ClientOption: co, TLS: &tt.files})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error starting %q", err, tt.want)
			}
		})
	}
}

// A client certificate rewritten on disk is used for the connections
// made since, and the checks in flight across the rotation all decide in
// Redis. The server trusts a second CA; the new certificate is signed by
// it, and once the server trusts it alone, a connection made as the
// store makes its own still gets in.
func TestTLSRotation(t *testing.T) {
	failureRequireRedis(t)
	ca2, err := redistest.NewCA("rotated CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redistest.StartTLS(t.TempDir(), redistest.TLSOptions{TrustAlso: ca2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	copyFile(t, srv.Certs.ClientCert, cert)
	copyFile(t, srv.Certs.ClientKey, key)
	reloads := make(chan error, 16)
	var o redisstore.Options
	redisstore.OnTLSReload(&o, func(err error) { reloads <- err })
	o.Timeout = redisstore.DefaultTimeout
	s := newURLStore(t, tlsURL(srv), &redisstore.TLSFiles{CA: srv.Certs.CAFile, Cert: cert, Key: key}, o)
	waitConnected(t, s)

	var checks, degraded, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	var last atomic.Int64 // the checks stop after this many
	last.Store(math.MaxInt64)
	done, half := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "rotation", Limits: []bouncer.Limit{{Algorithm: bouncer.GCRA, Rate: 1 << 20, Burst: 1 << 20, Period: time.Second}}}}, Cost: 1}
		for n := int64(1); n <= last.Load(); n++ {
			d, err := s.Check(context.Background(), req)
			switch {
			case err != nil:
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
			case d.Degraded:
				degraded.Add(1)
			}
			if checks.Add(1) == 200 {
				close(half)
			}
		}
	}()
	<-half
	newCert, newKey, err := ca2.Issue("rotated client")
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, key, newKey)
	replaceFile(t, cert, newCert)
	timeout := time.After(10 * time.Second)
	for TLSSubject(s) != "rotated client" {
		select {
		case <-reloads:
		case <-timeout:
			t.Fatalf("the store still presents %q 10 s after the files changed", TLSSubject(s))
		}
	}
	// The server now accepts certificates of the second CA only: the old
	// one is refused, and a connection made as the store makes its own
	// gets in.
	only2 := filepath.Join(dir, "ca2.pem")
	if err := os.WriteFile(only2, ca2.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := srv.CLI(srv.Addrs[0], "config", "set", "tls-ca-cert-file", only2); err != nil || out != "OK" {
		t.Fatalf("config set tls-ca-cert-file: %q, %v", out, err)
	}
	if out, err := srv.CLI(srv.Addrs[0], "ping"); err == nil && out == "PONG" {
		t.Fatalf("the old client certificate still gets in after the server stopped trusting its CA")
	}
	if err := redisstore.PingTLS(t.Context(), s, srv.Addrs[0]); err != nil {
		t.Fatalf("a new connection with the rotated certificate: %v", err)
	}
	last.Store(checks.Load() + 200)
	<-done
	if n, f := degraded.Load(), failed.Load(); n != 0 || f != 0 {
		t.Errorf("got %d degraded checks and %d errors of %d across the rotation, want 0", n, f, checks.Load())
		if e := firstErr.Load(); e != nil {
			t.Errorf("the first error: %v", *e)
		}
	}
}

// TLSSubject is the common name of the client certificate s presents.
func TLSSubject(s *redisstore.Store) string {
	if c := redisstore.TLSClientCert(s); c != nil {
		return c.Subject.CommonName
	}
	return ""
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, to, b)
}

// replaceFile writes data to path as a deployment does: a new file
// renamed over the old one.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Every connection of a store carries its client name, DefaultClientName
// unless the option says otherwise, as CLIENT LIST shows.
func TestClientNameInClientList(t *testing.T) {
	addr := addrs(t, "BOUNCER_REDIS_ADDR")[0]
	admin := newClient(t, []string{addr})
	for _, name := range []string{"", "bouncer-test-" + freshPrefix()} {
		co, err := redisstore.ParseURL("redis://" + addr)
		if err != nil {
			t.Fatal(err)
		}
		want := redisstore.DefaultClientName()
		if name != "" {
			co.ClientName, want = name, name
		}
		s, err := redisstore.New(redisstore.Options{ClientOption: co, Prefix: freshPrefix()})
		if err != nil {
			t.Fatal(err)
		}
		waitConnected(t, s)
		req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "named", Limits: []bouncer.Limit{{Algorithm: bouncer.GCRA, Rate: 10, Burst: 10, Period: time.Second}}}}, Cost: 1}
		if d, err := s.Check(t.Context(), req); err != nil || d.Degraded {
			t.Fatalf("check: %+v, %v", d, err)
		}
		list, err := admin.Do(t.Context(), admin.B().ClientList().Build()).ToString()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(list, " name="+want+" ") {
			t.Errorf("CLIENT LIST has no connection named %q:\n%s", want, list)
		}
	}
}
