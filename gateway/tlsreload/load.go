package tlsreload

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
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
	s := &state{}
	var err error
	if s.certPEM, err = readFile("cert file", r.c.CertFile); err != nil {
		return nil, err
	}
	chain, err := parseCerts(s.certPEM)
	if err != nil {
		return nil, fileError("cert file", r.c.CertFile, err)
	}
	if s.keyPEM, err = readFile("key file", r.c.KeyFile); err != nil {
		return nil, err
	}
	key, err := parseKey(s.keyPEM)
	if err != nil {
		return nil, fileError("key file", r.c.KeyFile, err)
	}
	s.leaf = chain[0]
	if pub, ok := s.leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("tlsreload: key file %s does not match cert file %s", r.c.KeyFile, r.c.CertFile)
	}
	var pool *x509.CertPool
	if r.c.ClientCAFile != "" {
		if s.caPEM, err = readFile("client CA file", r.c.ClientCAFile); err != nil {
			return nil, err
		}
		cas, err := parseCerts(s.caPEM)
		if err != nil {
			return nil, fileError("client CA file", r.c.ClientCAFile, err)
		}
		pool = x509.NewCertPool()
		for _, ca := range cas {
			pool.AddCert(ca)
		}
	}
	s.cert = &tls.Certificate{PrivateKey: key, Leaf: s.leaf}
	for _, c := range chain {
		s.cert.Certificate = append(s.cert.Certificate, c.Raw)
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

func fileError(role, path string, err error) error {
	return fmt.Errorf("tlsreload: %s %s: %w", role, path, err)
}

// readFile reads path, with an error that names the file once.
func readFile(role, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err
		}
		return nil, fileError(role, path, err)
	}
	return b, nil
}

// pemBlocks decodes every PEM block of data. A block cut short is an
// error rather than the end of the file: it is what a file caught half
// written looks like, and serving the blocks before it would serve a
// chain without its intermediates.
func pemBlocks(data []byte) ([]*pem.Block, error) {
	var blocks []*pem.Block
	rest := data
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		blocks, rest = append(blocks, b), r
	}
	if bytes.Contains(rest, []byte("-----BEGIN")) {
		return nil, errors.New("a PEM block is cut short or malformed")
	}
	if len(blocks) == 0 {
		return nil, errors.New("not PEM")
	}
	return blocks, nil
}

// parseCerts returns the certificates of data in order, skipping other
// blocks (a key kept in the same file).
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	blocks, err := pemBlocks(data)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, b := range blocks {
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no CERTIFICATE block")
	}
	return certs, nil
}

// parseKey returns the first private key of data, in any of the
// encodings crypto/tls reads.
func parseKey(data []byte) (crypto.Signer, error) {
	blocks, err := pemBlocks(data)
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		if b.Type == "ENCRYPTED PRIVATE KEY" {
			return nil, errors.New("an encrypted private key is not supported")
		}
		if b.Type != "PRIVATE KEY" && !strings.HasSuffix(b.Type, " PRIVATE KEY") {
			continue
		}
		if k, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
			if s, ok := k.(crypto.Signer); ok {
				return s, nil
			}
			return nil, fmt.Errorf("a %T cannot sign", k)
		}
		if k, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
			return k, nil
		}
		if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
			return k, nil
		}
		return nil, fmt.Errorf("%s block: not PKCS #8, PKCS #1 or SEC 1", b.Type)
	}
	return nil, errors.New("no PRIVATE KEY block")
}
