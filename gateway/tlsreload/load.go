package tlsreload

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/bouncerhq/bouncer/internal/pemfile"
)

// state is one load of the files, served whole.
type state struct {
	certPEM, keyPEM, caPEM []byte // as read, to tell an unchanged reload

	leaf *x509.Certificate
	cert *tls.Certificate
	conf *tls.Config // what GetConfigForClient gives each handshake
}

func (s *state) same(o *state) bool {
	return bytes.Equal(s.certPEM, o.certPEM) && bytes.Equal(s.keyPEM, o.keyPEM) && bytes.Equal(s.caPEM, o.caPEM)
}

// load reads and checks the files of r.c; the state it returns is
// complete or there is none.
func (r *Reloader) load() (*state, error) {
	p, err := pemfile.ReadPair(r.c.CertFile, r.c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsreload: %w", err)
	}
	s := &state{certPEM: p.CertPEM, keyPEM: p.KeyPEM, leaf: p.Cert.Leaf, cert: p.Cert}
	var pool *x509.CertPool
	if r.c.ClientCAFile != "" {
		if pool, s.caPEM, err = pemfile.ReadPool("client CA file", r.c.ClientCAFile); err != nil {
			return nil, fmt.Errorf("tlsreload: %w", err)
		}
	}
	s.conf = &tls.Config{
		Certificates: []tls.Certificate{*s.cert},
		ClientAuth:   r.auth,
		ClientCAs:    pool,
		MinVersion:   r.minVer,
		NextProtos:   nextProtos,
	}
	return s, nil
}
