package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bouncerhq/bouncer/internal/pemfile"
)

// Config names the files a Reloader serves and how it asks for client
// certificates. Its yaml tags are its names in `bouncer gateway`'s
// config file, which holds it as is.
type Config struct {
	// CertFile and KeyFile are PEM: the certificate, followed by its
	// intermediates, and its private key (PKCS #8, SEC 1 or PKCS #1).
	// Both are required.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`

	// ClientCAFile is a PEM bundle of the CAs that sign client
	// certificates; "" disables client certificates. It is reloaded
	// with the certificate, and a CA dropped from it is dropped for
	// resumed sessions too: crypto/tls verifies a session ticket's
	// client chain against the bundle of the handshake that resumes it.
	ClientCAFile string `yaml:"client_ca_file"`

	// ClientAuth is "none" (the default, for ""), "request" (a client
	// may present a certificate, which is then verified against
	// ClientCAFile) or "require" (a client must present one that
	// verifies). "request" and "require" need ClientCAFile, and
	// ClientCAFile needs one of them: a CA bundle given without a mode
	// is refused rather than silently not checked.
	//
	// Security: a verified certificate says only that one of the CAs
	// signed it; authorizing its subject is the caller's job, from
	// http.Request.TLS.VerifiedChains.
	ClientAuth string `yaml:"client_auth"`

	// MinVersion is the lowest TLS version accepted: "1.2" (the
	// default, for "") or "1.3".
	MinVersion string `yaml:"min_version"`
}

// Options are a Reloader's optional settings; the zero value is usable.
type Options struct {
	// Logger receives a line when a certificate is loaded, when it is
	// expired or not yet valid (a warning, not an error), and when new
	// files are rejected and the old certificate kept. Nil means
	// slog.Default().
	Logger *slog.Logger

	// OnReload, if not nil, is called after every reload attempt, by
	// Reload or after a change to the files, with the leaf certificate
	// served now and the error that rejected the new files (nil when
	// they loaded, or had not changed). It is not called for New's
	// first load. Calls do not overlap; OnReload must not call Reload.
	OnReload func(leaf *x509.Certificate, err error)
}

// nextProtos offers HTTP/2 first, as net/http does.
var nextProtos = []string{"h2", "http/1.1"}

var clientAuths = map[string]tls.ClientAuthType{
	"":        tls.NoClientCert,
	"none":    tls.NoClientCert,
	"request": tls.VerifyClientCertIfGiven,
	"require": tls.RequireAndVerifyClientCert,
}

var minVersions = map[string]uint16{
	"":    tls.VersionTLS12,
	"1.2": tls.VersionTLS12,
	"1.3": tls.VersionTLS13,
}

// Reloader serves the newest good certificate of its files. Its methods
// are safe for concurrent use.
type Reloader struct {
	c        Config
	auth     tls.ClientAuthType
	minVer   uint16
	log      *slog.Logger
	onReload func(*x509.Certificate, error)

	mu  sync.Mutex // serializes loads
	cur atomic.Pointer[state]

	watch     *pemfile.Watch
	closeOnce sync.Once
	closeErr  error
}

// A FieldError is what Validate, and so New, return when a field of a
// Config is wrong: Field names it ("ClientAuth"), so that a config file
// can point at the line it came from.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks c's fields without reading its files, as New does
// first: a caller that builds its Reloaders later can refuse c now.
func (c Config) Validate() error {
	bad := func(field string, err error) error { return &FieldError{Field: field, Err: err} }
	switch {
	case c.CertFile == "":
		return bad("CertFile", errors.New("tlsreload: CertFile and KeyFile are required"))
	case c.KeyFile == "":
		return bad("KeyFile", errors.New("tlsreload: CertFile and KeyFile are required"))
	}
	auth, ok := clientAuths[c.ClientAuth]
	switch {
	case !ok:
		return bad("ClientAuth", fmt.Errorf("tlsreload: ClientAuth %q: want none, request or require", c.ClientAuth))
	case auth != tls.NoClientCert && c.ClientCAFile == "":
		return bad("ClientAuth", fmt.Errorf("tlsreload: ClientAuth %q needs a ClientCAFile", c.ClientAuth))
	case auth == tls.NoClientCert && c.ClientCAFile != "":
		return bad("ClientCAFile", errors.New(`tlsreload: ClientCAFile is set but ClientAuth is "none": say "request" or "require"`))
	}
	if _, ok := minVersions[c.MinVersion]; !ok {
		return bad("MinVersion", fmt.Errorf("tlsreload: MinVersion %q: want 1.2 or 1.3", c.MinVersion))
	}
	return nil
}

// New loads the files of c and starts watching them. Its error names the
// file and the reason when one does not load, or the field (a
// *FieldError) when c is not valid; an expired certificate is logged,
// not refused. Close stops the watch.
func New(c Config, o Options) (*Reloader, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	auth, minVer := clientAuths[c.ClientAuth], minVersions[c.MinVersion]
	r := &Reloader{
		c: c, auth: auth, minVer: minVer, log: o.Logger, onReload: o.OnReload,
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	s, err := r.load()
	if err != nil {
		return nil, err
	}
	r.serve(s, time.Now())
	r.watch, err = pemfile.NewWatch([]string{c.CertFile, c.KeyFile, c.ClientCAFile}, func() { _ = r.Reload() }, func(err error) {
		// Events may have been lost (an overflowing queue): the watch
		// reads the files rather than miss a change.
		r.log.Warn("tlsreload: watching the certificate files", "err", err)
	})
	if err != nil {
		return nil, fmt.Errorf("tlsreload: watching the files: %w", err)
	}
	return r, nil
}

// TLSConfig returns a new config for a server: its GetConfigForClient
// gives each handshake the newest good certificate, client CA pool and
// client certificate policy, and its GetCertificate the certificate
// alone. It offers h2 and http/1.1. A caller that replaces
// GetConfigForClient loses the client certificate policy, which the
// returned config does not carry itself.
func (r *Reloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: r.minVer,
		NextProtos: slices.Clone(nextProtos),
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.cur.Load().cert, nil
		},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load().conf, nil
		},
	}
}

// Current returns the leaf certificate served now.
func (r *Reloader) Current() *x509.Certificate {
	return r.cur.Load().leaf
}

// Reload reads the files again now, as a change to them does, and serves
// them if they load whole. Otherwise it logs why, keeps serving the
// certificate it has, and returns the reason. It works after Close too.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	s, err := r.load()
	switch {
	case err != nil:
		r.log.Error("tlsreload: new files rejected, keeping the old certificate", "err", err)
	case s.same(r.cur.Load()):
		r.log.Debug("tlsreload: files unchanged", "cert_file", r.c.CertFile)
	default:
		r.serve(s, now)
	}
	if r.onReload != nil {
		r.onReload(r.Current(), err)
	}
	return err
}

// serve makes s the state handshakes get. A certificate outside its
// validity is served all the same: refusing it would turn a late renewal
// into an outage of the whole gateway, and clients check the dates.
func (r *Reloader) serve(s *state, now time.Time) {
	r.cur.Store(s)
	leaf := s.leaf
	attrs := []any{"cert_file", r.c.CertFile, "subject", leaf.Subject.String(),
		"serial", leaf.SerialNumber.String(), "not_before", leaf.NotBefore, "not_after", leaf.NotAfter}
	switch {
	case now.After(leaf.NotAfter):
		r.log.Warn("tlsreload: serving an expired certificate", attrs...)
	case now.Before(leaf.NotBefore):
		r.log.Warn("tlsreload: serving a certificate not yet valid", attrs...)
	default:
		r.log.Info("tlsreload: serving certificate", attrs...)
	}
}

// Close stops watching the files and waits for the watch to end; the
// certificate loaded last is still served, and Reload still works.
// Closing again does nothing.
func (r *Reloader) Close() error {
	r.closeOnce.Do(func() {
		r.closeErr = r.watch.Close()
	})
	return r.closeErr
}
