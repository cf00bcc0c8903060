package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNewJWTErrors checks that a config that cannot work is refused, and
// that the error names the file when a file is at fault.
func TestNewJWTErrors(t *testing.T) {
	rs, es := signerFor(RS256), signerFor(ES256)
	rsaPEM := pemPublic(t, rs.public)
	rsaFile := writeFile(t, "rsa.pem", rsaPEM)
	pemAsSecret := writeFile(t, "rsa-as-secret.pem", rsaPEM)
	privateFile := writeFile(t, "private.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(rs.key))}))
	smallFile := writeFile(t, "small.pem", pemPublic(t, &must(rsa.GenerateKey(rand.Reader, 1024)).PublicKey))
	p384File := writeFile(t, "p384.pem", pemPublic(t, &must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader)).PublicKey))
	shortSecret := writeFile(t, "short", []byte("0123456789abcdef0123456789abcde"))
	newlineSecret := writeFile(t, "newline", []byte("0123456789abcdef0123456789abcdef\n"))
	notPEM := writeFile(t, "not.pem", []byte("hello"))
	badJWKS := writeFile(t, "bad.json", []byte(`{"keys":[{"kty":"RSA","use":"enc"}]}`))
	missing := filepath.Join(t.TempDir(), "missing.pem")
	rsaKey := KeySource{File: rsaFile, Algorithms: []string{RS256}}

	tests := []struct {
		name string
		c    JWTConfig
		why  string
	}{
		{"no keys", JWTConfig{}, "no Keys"},
		{"empty source", JWTConfig{Keys: []KeySource{{}}}, "exactly one of File, JWKSFile and JWKSURL"},
		{"two kinds in one source", JWTConfig{Keys: []KeySource{{File: rsaFile, JWKSURL: "https://issuer.example/jwks", Algorithms: []string{RS256}}}}, "exactly one of"},
		{"missing file", JWTConfig{Keys: []KeySource{{File: missing, Algorithms: []string{RS256}}}}, missing},
		{"missing JWKS file", JWTConfig{Keys: []KeySource{{JWKSFile: missing}}}, missing},
		{"file without Algorithms", JWTConfig{Keys: []KeySource{{File: rsaFile}}}, "no Algorithms"},
		{"unknown algorithm", JWTConfig{Keys: []KeySource{{File: rsaFile, Algorithms: []string{"RS512"}}}}, `algorithm "RS512" is not one of`},
		{"none", JWTConfig{Keys: []KeySource{{File: rsaFile, Algorithms: []string{"none"}}}}, `algorithm "none" is not one of`},
		{"RSA key for ES256", JWTConfig{Keys: []KeySource{{File: rsaFile, Algorithms: []string{RS256, ES256}}}}, rsaFile + ": holds a key for RS256, which cannot verify ES256"},
		{"HS256 beside RS256", JWTConfig{Keys: []KeySource{{File: rsaFile, Algorithms: []string{RS256, HS256}}}}, "HS256 must be the only algorithm"},
		{"a public key as an HMAC secret", JWTConfig{Keys: []KeySource{{File: pemAsSecret, Algorithms: []string{HS256}}}}, pemAsSecret + ": holds a PEM block, not an HS256 secret"},
		{"short secret", JWTConfig{Keys: []KeySource{{File: shortSecret, Algorithms: []string{HS256}}}}, "secret of 31 bytes"},
		{"secret with a newline", JWTConfig{Keys: []KeySource{{File: newlineSecret, Algorithms: []string{HS256}}}}, "ends with a newline"},
		{"private key", JWTConfig{Keys: []KeySource{{File: privateFile, Algorithms: []string{RS256}}}}, "holds a private key"},
		{"1024-bit RSA", JWTConfig{Keys: []KeySource{{File: smallFile, Algorithms: []string{RS256}}}}, "1024 bits"},
		{"P-384", JWTConfig{Keys: []KeySource{{File: p384File, Algorithms: []string{ES256}}}}, "P-384"},
		{"not PEM", JWTConfig{Keys: []KeySource{{File: notPEM, Algorithms: []string{ES256}}}}, notPEM + ": holds no PEM block"},
		{"JWKS file without a usable key", JWTConfig{Keys: []KeySource{{JWKSFile: badJWKS}}}, badJWKS + ": no usable key"},
		{"KeyID on a JWKS", JWTConfig{Keys: []KeySource{{JWKSFile: badJWKS, KeyID: "a"}}}, "KeyID is for File"},
		{"RefreshEvery on a file", JWTConfig{Keys: []KeySource{{File: rsaFile, Algorithms: []string{RS256}, RefreshEvery: time.Hour}}}, "RefreshEvery and MinRefresh are for JWKSURL"},
		{"http URL", JWTConfig{Keys: []KeySource{{JWKSURL: "http://issuer.example/jwks"}}}, "use https"},
		{"password hidden", JWTConfig{Keys: []KeySource{{JWKSURL: "http://user:hunter2@issuer.example/jwks"}}}, "user:xxxxx@issuer.example"},
		{"MinRefresh too small", JWTConfig{Keys: []KeySource{{JWKSURL: "https://issuer.example/jwks", MinRefresh: time.Millisecond}}}, "MinRefresh 1ms"},
		{"MinRefresh over RefreshEvery", JWTConfig{Keys: []KeySource{{JWKSURL: "https://issuer.example/jwks", MinRefresh: time.Hour, RefreshEvery: time.Minute}}}, "MinRefresh 1h0m0s"},
		{"Skew too large", JWTConfig{Keys: []KeySource{rsaKey}, Skew: 6 * time.Minute}, "Skew 6m0s"},
		{"Skew negative", JWTConfig{Keys: []KeySource{rsaKey}, Skew: -time.Second}, "Skew -1s"},
		{"MaxTokenBytes negative", JWTConfig{Keys: []KeySource{rsaKey}, MaxTokenBytes: -1}, "MaxTokenBytes -1"},
		{"empty audience", JWTConfig{Keys: []KeySource{rsaKey}, Audience: []string{""}}, "empty Audience"},
		{"CacheTokens negative", JWTConfig{Keys: []KeySource{rsaKey}, CacheTokens: -1}, "CacheTokens -1 is not between 1 and 16777216"},
		{"CacheTokens too large", JWTConfig{Keys: []KeySource{rsaKey}, CacheTokens: 1<<24 + 1}, "CacheTokens 16777217 is not between 1 and 16777216"},
		{"named", JWTConfig{Name: "idp", Keys: []KeySource{{File: rsaFile}}}, `auth: jwt "idp": key source 0: file `},
		{"second source", JWTConfig{Keys: []KeySource{rsaKey, {File: keyFile(t, es)}}}, "key source 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := NewJWT(tt.c, Options{})
			if err == nil {
				j.Close()
				t.Fatalf("got no error, want one saying %q", tt.why)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("got %q, want it to say %q", err, tt.why)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("got %q, which shows the URL's password", err)
			}
		})
	}
}

// TestKeyFileFormats loads every PEM form a File may hold.
func TestKeyFileFormats(t *testing.T) {
	clk := newClock()
	rs := signerFor(RS256)
	pub := rs.public.(*rsa.PublicKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "issuer"},
		NotBefore: t0.AddDate(-2, 0, 0), NotAfter: t0.AddDate(-1, 0, 0)} // expired: dates are not checked
	cert := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, rs.key))
	files := map[string][]byte{
		"PKIX":     pemPublic(t, pub),
		"PKCS #1":  pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(pub)}),
		"cert":     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert}),
		"two PEMs": append(pemPublic(t, pub), pemPublic(t, signerFor(ES256).public)...),
	}
	tok := sign(t, rs, "", claimsAt(clk.Now()))
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			j := newJWT(t, JWTConfig{Keys: []KeySource{{File: writeFile(t, "key.pem", data), Algorithms: []string{RS256}}}}, Options{Now: clk.Now})
			if _, err := j.Authenticate(bearer(tok)); err != nil {
				t.Errorf("Authenticate: %v", err)
			}
		})
	}
}

// TestFieldErrors checks that NewJWT and NewAPIKeys say which field of
// their config is wrong, so that a config file can point at its line.
func TestFieldErrors(t *testing.T) {
	rsaFile := writeFile(t, "rsa.pem", pemPublic(t, signerFor(RS256).public))
	rsaKey := KeySource{File: rsaFile, Algorithms: []string{RS256}}
	hash := HashKey("k")
	tests := []struct {
		name  string
		new   func() error
		field string
	}{
		{"skew", jwtErr(JWTConfig{Keys: []KeySource{rsaKey}, Skew: time.Hour}), "Skew"},
		{"no keys", jwtErr(JWTConfig{}), "Keys"},
		{"cache size", jwtErr(JWTConfig{Keys: []KeySource{rsaKey}, CacheTokens: -5}), "CacheTokens"},
		{"second source's algorithm", jwtErr(JWTConfig{Keys: []KeySource{rsaKey, {File: rsaFile, Algorithms: []string{"none"}}}}), "Keys[1].Algorithms"},
		{"source with two kinds", jwtErr(JWTConfig{Keys: []KeySource{{File: rsaFile, JWKSFile: rsaFile}}}), "Keys[0]"},
		{"unreadable file", jwtErr(JWTConfig{Keys: []KeySource{{File: rsaFile + ".missing", Algorithms: []string{RS256}}}}), "Keys[0].File"},
		{"http URL", jwtErr(JWTConfig{Keys: []KeySource{{JWKSURL: "http://issuer.example/jwks"}}}), "Keys[0].JWKSURL"},
		{"key without id", apiKeysErr(APIKeyConfig{Keys: []APIKey{{ID: "a", Hash: hash}, {Hash: HashKey("j")}}}), "Keys[1].ID"},
		{"key in clear", apiKeysErr(APIKeyConfig{Keys: []APIKey{{ID: "a", Hash: "k"}}}), "Keys[0].Hash"},
		{"same hash", apiKeysErr(APIKeyConfig{Keys: []APIKey{{ID: "a", Hash: hash}, {ID: "b", Hash: hash}}}), "Keys[1].Hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fe *FieldError
			if err := tt.new(); !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FieldError", err)
			}
			if fe.Field != tt.field {
				t.Errorf("got field %q (%v), want %q", fe.Field, fe, tt.field)
			}
		})
	}
}

func jwtErr(c JWTConfig) func() error {
	return func() error {
		j, err := NewJWT(c, Options{})
		if err == nil {
			j.Close()
		}
		return err
	}
}

func apiKeysErr(c APIKeyConfig) func() error {
	return func() error { _, err := NewAPIKeys(c); return err }
}
