//go:build unix

package redisstore_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	o.Client, o.TLS = co, f
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
			_, err := redisstore.New(redisstore.Options{Client: co, TLS: &tt.files})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error starting %q", err, tt.want)
			}
		})
	}
}

// Files rewritten on disk — a client certificate from another CA, and
// the CA bundle with that CA added — are used for the connections made
// since, and the checks in flight across the rotation all decide in
// Redis. Then the server trusts only the new CA for clients, and serves a
// certificate of the new CA: a client with the old certificate is
// refused, and a connection made as the store makes its own gets in.
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
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	copyFile(t, srv.Certs.CAFile, ca)
	copyFile(t, srv.Certs.ClientCert, cert)
	copyFile(t, srv.Certs.ClientKey, key)
	reloads := make(chan error, 16)
	var o redisstore.Options
	redisstore.OnTLSReload(&o, func(err error) { reloads <- err })
	o.Timeout = redisstore.DefaultTimeout
	s := newURLStore(t, tlsURL(srv), &redisstore.TLSFiles{CA: ca, Cert: cert, Key: key}, o)
	waitConnected(t, s)

	stream := checkStream(s)
	t.Cleanup(func() { stream.stopAfter(0) }) // before the store closes
	<-stream.half
	newCert, newKey, err := ca2.Issue("rotated client")
	if err != nil {
		t.Fatal(err)
	}
	bundle := append(append([]byte{}, srv.Certs.CA.PEM...), ca2.PEM...)
	replaceFile(t, key, newKey)
	replaceFile(t, cert, newCert)
	replaceFile(t, ca, bundle)
	timeout := time.After(10 * time.Second)
	for TLSSubject(s) != "rotated client" || !bytes.Equal(redisstore.TLSRootsPEM(s), bundle) {
		select {
		case <-reloads:
		case <-timeout:
			t.Fatalf("the store still presents %q, and trusts the new CA: %v, 10 s after the files changed",
				TLSSubject(s), bytes.Equal(redisstore.TLSRootsPEM(s), bundle))
		}
	}
	renewServer(t, srv, ca2, dir)
	if err := pingAs(t, srv.Addrs[0], srv.Certs.ClientCert, srv.Certs.ClientKey, bundle); err == nil {
		t.Fatal("the old client certificate still gets in after the server stopped trusting its CA")
	}
	if err := redisstore.PingTLS(t.Context(), s, srv.Addrs[0]); err != nil {
		t.Fatalf("a new connection with the rotated files: %v", err)
	}
	stream.stopAfter(200)
	if n, f := stream.degraded.Load(), stream.failed.Load(); n != 0 || f != 0 {
		t.Errorf("got %d degraded checks and %d errors of %d across the rotation, want 0", n, f, stream.checks.Load())
		if e := stream.firstErr.Load(); e != nil {
			t.Errorf("the first error: %v", *e)
		}
	}
}

// renewServer makes srv trust client certificates of ca only, and serve
// a certificate of ca.
func renewServer(t *testing.T, srv *redistest.TLSServers, ca *redistest.CA, dir string) {
	t.Helper()
	cert, key, err := ca.Issue("rotated server")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca2.pem": ca.PEM, "server2.pem": cert, "server2.key": key}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := srv.CLI(srv.Addrs[0], "config", "set", "tls-ca-cert-file", filepath.Join(dir, "ca2.pem"),
		"tls-cert-file", filepath.Join(dir, "server2.pem"), "tls-key-file", filepath.Join(dir, "server2.key"))
	if err != nil || out != "OK" {
		t.Fatalf("config set: %q, %v", out, err)
	}
}

// pingAs connects to addr with a client certificate, trusting roots, and
// sends a PING: the error of a server that refuses the certificate comes
// at the first read.
func pingAs(t *testing.T, addr, certFile, keyFile string, roots []byte) error {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	c, err := tls.Dial("tcp", addr, &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

// stream is a goroutine's checks of one key, one after another, and what
// they gave.
type stream struct {
	checks, degraded, failed atomic.Int64
	firstErr                 atomic.Pointer[error]
	last                     atomic.Int64  // the checks stop after this many
	half, done               chan struct{} // closed after 200 checks, and when they stop
}

// checkStream starts checks on s until stopAfter.
func checkStream(s *redisstore.Store) *stream {
	st := &stream{half: make(chan struct{}), done: make(chan struct{})}
	st.last.Store(math.MaxInt64)
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "rotation", Limits: []bouncer.Limit{{Algorithm: bouncer.GCRA, Rate: 1 << 20, Burst: 1 << 20, Period: time.Second}}}}, Cost: 1}
	go func() {
		defer close(st.done)
		for n := int64(1); n <= st.last.Load(); n++ {
			d, err := s.Check(context.Background(), req)
			switch {
			case err != nil:
				st.failed.Add(1)
				st.firstErr.CompareAndSwap(nil, &err)
			case d.Degraded:
				st.degraded.Add(1)
			}
			if st.checks.Add(1) == 200 {
				close(st.half)
			}
		}
	}()
	return st
}

// stopAfter lets n more checks run, and waits for them.
func (st *stream) stopAfter(n int64) {
	st.last.Store(st.checks.Load() + n)
	<-st.done
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
		s, err := redisstore.New(redisstore.Options{Client: co, Prefix: freshPrefix()})
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
