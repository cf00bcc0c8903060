package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The algorithms a token may be signed with. Each kind of key verifies
// exactly one of them, so that no key is ever used with an algorithm of
// another kind: an RSA public key is never taken for an HMAC secret.
const (
	HS256 = "HS256" // HMAC with SHA-256: a shared secret of at least 32 bytes
	RS256 = "RS256" // RSA PKCS #1 v1.5 with SHA-256: an RSA key of at least 2048 bits
	ES256 = "ES256" // ECDSA on P-256 with SHA-256
	EdDSA = "EdDSA" // Ed25519
)

// algorithms are those a KeySource may name: the one list, which
// bouncer gateway's config is checked against too (by NewJWT).
var algorithms = []string{HS256, RS256, ES256, EdDSA}

const (
	minSecretBytes = 32   // RFC 7518, section 3.2: at least the hash's size
	minRSABits     = 2048 // RFC 7518, section 3.3
)

// A key verifies tokens signed with alg.
type key struct {
	id       string // the kid it answers to; "" for tokens without one
	alg      string
	material any // []byte, *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// algFor returns the one algorithm material verifies, or an error saying
// why it cannot be used.
func algFor(material any) (string, error) {
	switch k := material.(type) {
	case []byte:
		if len(k) < minSecretBytes {
			return "", fmt.Errorf("an HS256 secret of %d bytes: at least %d are needed", len(k), minSecretBytes)
		}
		return HS256, nil
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < minRSABits {
			return "", fmt.Errorf("an RSA key of %d bits: at least %d are needed", n, minRSABits)
		}
		return RS256, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("an EC key on %s: only P-256 (ES256) is supported", k.Curve.Params().Name)
		}
		return ES256, nil
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return "", fmt.Errorf("an Ed25519 key of %d bytes", len(k))
		}
		return EdDSA, nil
	}
	return "", fmt.Errorf("a %T key is not supported", material)
}

// checkAlgorithms checks that algs is a non-empty list of supported
// algorithms; empty is allowed when optional.
func checkAlgorithms(algs []string, optional bool) error {
	if len(algs) == 0 && !optional {
		return errors.New("no Algorithms")
	}
	for _, a := range algs {
		if !slices.Contains(algorithms, a) {
			return fmt.Errorf("algorithm %q is not one of %s", a, strings.Join(algorithms, ", "))
		}
	}
	return nil
}

// loadFile reads the key of a KeySource with a File: the raw secret when
// Algorithms is exactly [HS256], a PEM public key or certificate
// otherwise.
func loadFile(s KeySource) (*key, error) {
	data, err := os.ReadFile(s.File)
	if err != nil {
		return nil, err
	}
	var material any
	if slices.Contains(s.Algorithms, HS256) {
		if slices.ContainsFunc(s.Algorithms, func(a string) bool { return a != HS256 }) {
			return nil, errors.New("HS256 must be the only algorithm of a file, which then holds the secret")
		}
		if material, err = secret(data); err != nil {
			return nil, err
		}
	} else if material, err = publicKey(data); err != nil {
		return nil, err
	}
	alg, err := algFor(material)
	if err != nil {
		return nil, fmt.Errorf("holds %w", err)
	}
	for _, a := range s.Algorithms {
		if a != alg {
			return nil, fmt.Errorf("holds a key for %s, which cannot verify %s", alg, a)
		}
	}
	return &key{id: s.KeyID, alg: alg, material: material}, nil
}

// secret returns a file's bytes as an HMAC secret.
func secret(data []byte) ([]byte, error) {
	if bytes.Contains(data, []byte("-----BEGIN")) {
		// The classic HS/RS confusion is verifying HS256 with the bytes
		// of a public key, which anyone can read.
		return nil, errors.New("holds a PEM block, not an HS256 secret: a public key is never an HMAC secret")
	}
	if bytes.HasSuffix(data, []byte("\n")) {
		// The secret is the file's exact bytes; a newline an editor or
		// echo added would silently make it another secret.
		return nil, errors.New("ends with a newline, which would be part of the HS256 secret: write the file without one (printf, echo -n)")
	}
	return data, nil
}

// publicKey parses the first PEM block of data: a public key (PKIX or
// PKCS #1) or a certificate, whose key is used and whose dates and chain
// are not checked.
func publicKey(data []byte) (any, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("holds no PEM block (an HS256 secret needs Algorithms [HS256])")
	}
	switch {
	case block.Type == "PUBLIC KEY":
		return x509.ParsePKIXPublicKey(block.Bytes)
	case block.Type == "RSA PUBLIC KEY":
		return x509.ParsePKCS1PublicKey(block.Bytes)
	case block.Type == "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		return cert.PublicKey, nil
	case strings.Contains(block.Type, "PRIVATE KEY"):
		return nil, errors.New("holds a private key: give the public key or a certificate, and keep the private key with the issuer")
	}
	return nil, fmt.Errorf("holds a PEM block of type %q, not a public key or certificate", block.Type)
}
