package tlsreload_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bouncerhq/bouncer/gateway/tlsreload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logBuffer collects a Reloader's log lines; the watch writes them from
// its own goroutine.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// reload is one call of Options.OnReload.
type reload struct {
	leaf *x509.Certificate
	err  error
}

// recorder keeps the calls of OnReload and signals each one, so that a
// test waits for the reload it expects instead of for a time.
type recorder struct {
	mu     sync.Mutex
	got    []reload
	next   int
	signal chan struct{}
}

func newRecorder() *recorder { return &recorder{signal: make(chan struct{}, 1)} }

func (rec *recorder) on(leaf *x509.Certificate, err error) {
	rec.mu.Lock()
	rec.got = append(rec.got, reload{leaf, err})
	rec.mu.Unlock()
	select {
	case rec.signal <- struct{}{}:
	default:
	}
}

// wait returns the first reload not yet waited for that satisfies ok,
// passing over the others: file events arrive when the kernel sends them,
// and a write in two steps may be seen half done first.
func (rec *recorder) wait(t *testing.T, what string, ok func(reload) bool) reload {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		rec.mu.Lock()
		for rec.next < len(rec.got) {
			r := rec.got[rec.next]
			rec.next++
			if ok(r) {
				rec.mu.Unlock()
				return r
			}
		}
		rec.mu.Unlock()
		select {
		case <-rec.signal:
		case <-timeout:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// loaded waits for a reload that serves p.
func (rec *recorder) loaded(t *testing.T, p pair) {
	t.Helper()
	rec.wait(t, "the reload of "+p.leaf.Subject.CommonName+" "+p.leaf.SerialNumber.String(), func(r reload) bool {
		return r.err == nil && r.leaf.Equal(p.leaf)
	})
}

// rejected waits for a reload that fails, and returns its error.
func (rec *recorder) rejected(t *testing.T) error {
	t.Helper()
	return rec.wait(t, "a rejected reload", func(r reload) bool { return r.err != nil }).err
}

// fixture is a Reloader over files in a temporary directory, serving
// HTTPS on loopback.
type fixture struct {
	ca                        *authority
	dir                       string
	certFile, keyFile, caFile string
	r                         *tlsreload.Reloader
	rec                       *recorder
	logs                      *logBuffer
	addr                      string
}

// files writes a certificate and key as dir/cert.pem and dir/key.pem,
// laid out in one of the ways certificates are deployed; version counts
// the writes from 1, the first.
type files func(t *testing.T, dir string, version int, p pair)

// inPlace writes the files over the old ones.
func inPlace(t *testing.T, dir string, _ int, p pair) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "cert.pem"), p.certPEM)
	writeFile(t, filepath.Join(dir, "key.pem"), p.keyPEM)
}

// setup writes p with write into a new directory and serves it with c's
// other fields. A ClientCAFile in c is a name in that directory, where
// setup writes ca's certificate.
func setup(t *testing.T, ca *authority, p pair, c tlsreload.Config, write files) *fixture {
	t.Helper()
	f := &fixture{ca: ca, dir: t.TempDir(), rec: newRecorder(), logs: &logBuffer{}}
	f.certFile = filepath.Join(f.dir, "cert.pem")
	f.keyFile = filepath.Join(f.dir, "key.pem")
	write(t, f.dir, 1, p)
	c.CertFile, c.KeyFile = f.certFile, f.keyFile
	if c.ClientCAFile != "" {
		f.caFile = filepath.Join(f.dir, c.ClientCAFile)
		writeFile(t, f.caFile, ca.pem)
		c.ClientCAFile = f.caFile
	}
	f.start(t, c)
	return f
}

func (f *fixture) start(t *testing.T, c tlsreload.Config) {
	t.Helper()
	r, err := tlsreload.New(c, tlsreload.Options{Logger: f.logs.logger(), OnReload: f.rec.on})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	f.r = r
	f.addr = serve(t, r.TLSConfig())
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// replace writes b to path as most tools do: into a new file, renamed
// over the old one.
func replace(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	writeFile(t, tmp, b)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// serve runs an http.Server with conf on a loopback port, answering with
// the common name of the client's verified certificate, if any.
func serve(t *testing.T, conf *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if chains := req.TLS.VerifiedChains; len(chains) > 0 {
				fmt.Fprint(w, chains[0][0].Subject.CommonName)
			}
		}),
		TLSConfig: conf,
		ErrorLog:  log.New(io.Discard, "", 0), // refused handshakes are expected
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("ServeTLS: %v", err)
		}
	})
	return ln.Addr().String()
}

// answer is what a client saw of one request on a new connection.
type answer struct {
	leaf       *x509.Certificate // the server's
	version    uint16
	resumed    bool
	protoMajor int
	body       string
}

// clientConfig trusts ca and presents cert, if not nil, when asked for one.
func clientConfig(ca *authority, cert *pair) *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	c := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	if cert != nil {
		kp, err := tls.X509KeyPair(cert.certPEM, cert.keyPEM)
		if err != nil {
			panic(err)
		}
		// Always sent, even when the server names other CAs, as Go's
		// client would not: the server, not the client, must refuse it.
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }
	}
	return c
}

// get makes one request to addr on a new connection, so with a new
// handshake: no connection or session is reused.
func get(t *testing.T, addr string, conf *tls.Config) (answer, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/")
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{
		leaf:       resp.TLS.PeerCertificates[0],
		version:    resp.TLS.Version,
		resumed:    resp.TLS.DidResume,
		protoMajor: resp.ProtoMajor,
		body:       string(body),
	}, nil
}

// serves checks that a new handshake with f's server sees p.
func (f *fixture) serves(t *testing.T, p pair) {
	t.Helper()
	a, err := get(t, f.addr, clientConfig(f.ca, nil))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if !a.leaf.Equal(p.leaf) {
		t.Fatalf("handshake got certificate serial %v, want %v", a.leaf.SerialNumber, p.leaf.SerialNumber)
	}
	if got := f.r.Current(); !got.Equal(p.leaf) {
		t.Fatalf("Current() got serial %v, want %v", got.SerialNumber, p.leaf.SerialNumber)
	}
}
