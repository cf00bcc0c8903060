package redisstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/internal/pemfile"
)

// TLSFiles are the files of the store's TLS to Redis (Options.TLS). The
// store reads them at New, which fails naming the file and the reason
// when one is missing, is not PEM, or when the key does not match the
// certificate; it then watches them, and reads them again once changes
// pause (a write in place, a file renamed over, a Kubernetes Secret's
// swap), so that a renewed certificate or CA bundle is used without a
// restart: connections made since use the new files, and connections
// open stay as they are, so no call fails for a rotation. A set of files
// that does not load whole (a certificate whose new key has not arrived
// yet) is logged and ignored, and the last good one stays in use.
type TLSFiles struct {
	// CA is a PEM bundle of the CAs that sign the servers' certificates;
	// "" trusts the system's roots.
	CA string

	// Cert and Key are the client certificate (followed by its
	// intermediates) and its private key (PKCS #8, SEC 1 or PKCS #1),
	// PEM, for servers that require one (mutual TLS: Redis's
	// tls-auth-clients); both or neither.
	Cert, Key string

	// ServerName is the name the servers' certificates must be valid
	// for; "" means the host of each address dialled, which on a Cluster
	// or behind Sentinel is each node's own.
	ServerName string

	// InsecureSkipVerify accepts any certificate from the servers.
	//
	// Security: anyone on the path to Redis can then read and change
	// every call, credentials included. It is for a test bench only;
	// the store logs a warning when it starts with it. CA cannot be set
	// with it.
	InsecureSkipVerify bool
}

// tlsFiles is the client TLS of a store with Options.TLS: the files as
// last read whole, the config rueidis dials with, and the watch.
type tlsFiles struct {
	f        TLSFiles
	log      *slog.Logger
	onReload func(error) // tests only: after every reload attempt

	conf  *tls.Config // what rueidis dials with (apply)
	mu    sync.Mutex  // serializes loads
	cur   atomic.Pointer[tlsState]
	watch *pemfile.Watch // nil without files
}

// tlsState is one load of the files, used whole.
type tlsState struct {
	caPEM, certPEM, keyPEM []byte
	roots                  *x509.CertPool   // nil: the system's
	cert                   *tls.Certificate // nil: none
}

func (s *tlsState) same(o *tlsState) bool {
	return bytes.Equal(s.caPEM, o.caPEM) && bytes.Equal(s.certPEM, o.certPEM) && bytes.Equal(s.keyPEM, o.keyPEM)
}

// validate reports what newTLSFiles refuses in f without reading it.
func (f TLSFiles) validate() error {
	switch {
	case (f.Cert == "") != (f.Key == ""):
		return errors.New("redisstore: TLS: Cert and Key go together (a client certificate and its key)")
	case f.InsecureSkipVerify && f.CA != "":
		return errors.New("redisstore: TLS: InsecureSkipVerify with a CA: the CA would not be checked; choose one")
	}
	return nil
}

// newTLSFiles loads f and starts watching its files.
func newTLSFiles(f TLSFiles, log *slog.Logger, onReload func(error)) (*tlsFiles, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	t := &tlsFiles{f: f, log: log, onReload: onReload}
	s, err := t.load()
	if err != nil {
		return nil, err
	}
	t.cur.Store(s)
	if f.InsecureSkipVerify {
		log.Warn("redis TLS: the servers' certificates are NOT verified (InsecureSkipVerify): anyone on the path to Redis can read and change every call")
	}
	if f.CA == "" && f.Cert == "" {
		return t, nil
	}
	t.watch, err = pemfile.NewWatch([]string{f.CA, f.Cert, f.Key}, func() { _ = t.reload() }, func(err error) {
		log.Warn("redis TLS: watching the certificate files", "err", err)
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: TLS: watching the files: %w", err)
	}
	return t, nil
}

// load reads the files; the state it returns is complete or there is none.
func (t *tlsFiles) load() (*tlsState, error) {
	s := &tlsState{}
	var err error
	if t.f.CA != "" {
		if s.roots, s.caPEM, err = pemfile.ReadPool("CA file", t.f.CA); err != nil {
			return nil, fmt.Errorf("redisstore: TLS: %w", err)
		}
	}
	if t.f.Cert != "" {
		p, err := pemfile.ReadPair(t.f.Cert, t.f.Key)
		if err != nil {
			return nil, fmt.Errorf("redisstore: TLS: %w", err)
		}
		s.certPEM, s.keyPEM, s.cert = p.CertPEM, p.KeyPEM, p.Cert
	}
	return s, nil
}

// reload reads the files again, and uses them if they load whole.
func (t *tlsFiles) reload() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.load()
	switch {
	case err != nil:
		t.log.Error("redis TLS: new files rejected, keeping the old ones", "err", err)
	case s.same(t.cur.Load()):
	default:
		t.cur.Store(s)
		attrs := []any{"ca_file", t.f.CA, "cert_file", t.f.Cert}
		if s.cert != nil {
			attrs = append(attrs, "subject", s.cert.Leaf.Subject.String(), "not_after", s.cert.Leaf.NotAfter)
		}
		t.log.Info("redis TLS: files reloaded; new connections use them", attrs...)
	}
	if t.onReload != nil {
		t.onReload(err)
	}
	return err
}

// apply makes co dial over TLS with t: the client certificate comes from
// the newest files at each handshake (GetClientCertificate), and so do
// the roots, which crypto/tls reads from a config's RootCAs only: the
// dial function gives each connection a copy of the config with the
// newest. Sentinels, when co names a master set, are dialled alike.
func (t *tlsFiles) apply(co *rueidis.ClientOption) error {
	if co.DialFn != nil || co.DialCtxFn != nil {
		return errors.New("redisstore: TLS: Client has a dial function of its own; dial over TLS in it instead")
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.f.ServerName, InsecureSkipVerify: t.f.InsecureSkipVerify}
	if t.f.Cert != "" {
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return t.cur.Load().cert, nil
		}
	}
	t.conf, co.TLSConfig, co.DialCtxFn = conf, conf, t.dial
	if co.Sentinel.MasterSet != "" {
		co.Sentinel.TLSConfig = conf
	}
	return nil
}

// dial connects to dst over TLS with conf and the newest roots, or over
// plain TCP when conf is nil.
func (t *tlsFiles) dial(ctx context.Context, dst string, d *net.Dialer, conf *tls.Config) (net.Conn, error) {
	if conf == nil {
		return d.DialContext(ctx, "tcp", dst)
	}
	if roots := t.cur.Load().roots; roots != nil {
		conf = conf.Clone()
		conf.RootCAs = roots
	}
	td := tls.Dialer{NetDialer: d, Config: conf}
	return td.DialContext(ctx, "tcp", dst)
}

// hint explains a connection error that, without a client certificate,
// most likely means the server requires one: over TLS 1.3 a server
// refuses a client's certificate after the client's side of the
// handshake is done, so the client sees its first write reset, or the
// connection closed, rather than the server's alert. It is "" otherwise,
// and for a nil t.
func (t *tlsFiles) hint(err error) string {
	if t == nil || t.f.Cert != "" {
		return ""
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "certificate required") {
		return " (the server closed the TLS connection: if it requires client certificates, tls-auth-clients, give one)"
	}
	return ""
}

// close stops the watch.
func (t *tlsFiles) close() error {
	if t.watch == nil {
		return nil
	}
	return t.watch.Close()
}
