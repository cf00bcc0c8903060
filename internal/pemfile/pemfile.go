// Package pemfile reads the PEM files of TLS — certificate chains, private
// keys and CA bundles — with errors that name the file and its role, and
// watches them for changes. The gateway's listeners (gateway/tlsreload)
// and the Redis store's client (redisstore) read their files alike.
package pemfile

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

// Error is a file that did not load: its role ("cert file"), its path
// and the reason.
func Error(role, path string, err error) error {
	return fmt.Errorf("%s %s: %w", role, path, err)
}

// Read reads path, with an error that names its role and the file once.
func Read(role, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err
		}
		return nil, Error(role, path, err)
	}
	return b, nil
}

// A Pair is a certificate chain and its key, as read.
type Pair struct {
	CertPEM, KeyPEM []byte
	Cert            *tls.Certificate // its Leaf is set
}

// ReadPair reads a certificate chain (leaf first) from certFile and its
// private key from keyFile, and checks that they match.
func ReadPair(certFile, keyFile string) (*Pair, error) {
	p := &Pair{}
	var err error
	if p.CertPEM, err = Read("cert file", certFile); err != nil {
		return nil, err
	}
	chain, err := Certs(p.CertPEM)
	if err != nil {
		return nil, Error("cert file", certFile, err)
	}
	if p.KeyPEM, err = Read("key file", keyFile); err != nil {
		return nil, err
	}
	key, err := Key(p.KeyPEM)
	if err != nil {
		return nil, Error("key file", keyFile, err)
	}
	leaf := chain[0]
	if pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("key file %s does not match cert file %s", keyFile, certFile)
	}
	p.Cert = &tls.Certificate{PrivateKey: key, Leaf: leaf}
	for _, c := range chain {
		p.Cert.Certificate = append(p.Cert.Certificate, c.Raw)
	}
	return p, nil
}

// ReadPool reads a CA bundle from path, in the role given ("CA file").
func ReadPool(role, path string) (*x509.CertPool, []byte, error) {
	data, err := Read(role, path)
	if err != nil {
		return nil, nil, err
	}
	cas, err := Certs(data)
	if err != nil {
		return nil, nil, Error(role, path, err)
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	return pool, data, nil
}

// blocks decodes every PEM block of data. A block cut short is an error
// rather than the end of the file: it is what a file caught half written
// looks like, and using the blocks before it would use a chain without
// its intermediates.
func blocks(data []byte) ([]*pem.Block, error) {
	var bs []*pem.Block
	rest := data
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		bs, rest = append(bs, b), r
	}
	if bytes.Contains(rest, []byte("-----BEGIN")) {
		return nil, errors.New("a PEM block is cut short or malformed")
	}
	if len(bs) == 0 {
		return nil, errors.New("not PEM")
	}
	return bs, nil
}

// Certs returns the certificates of data in order, skipping other
// blocks (a key kept in the same file).
func Certs(data []byte) ([]*x509.Certificate, error) {
	bs, err := blocks(data)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, b := range bs {
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

// Key returns the first private key of data, in any of the encodings
// crypto/tls reads.
func Key(data []byte) (crypto.Signer, error) {
	bs, err := blocks(data)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
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
