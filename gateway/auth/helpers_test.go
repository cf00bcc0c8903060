package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/storetest"
	"github.com/golang-jwt/jwt/v5"
)

// t0 is the instant the tests' clocks start at.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// newClock is the tests' fake Options.Now, at t0 until moved.
func newClock() *storetest.Clock { return storetest.NewClock(t0) }

// A signer is a private key with the algorithm it signs with.
type signer struct {
	alg    string
	method jwt.SigningMethod
	key    crypto.PrivateKey // or []byte for HS256
	public any               // the verifying key: []byte for HS256
}

// Key generation is slow enough under -race to do once per kind.
var (
	rsaKey = sync.OnceValue(func() *rsa.PrivateKey { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	ecKey  = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) })
	edKey  = sync.OnceValue(func() ed25519.PrivateKey {
		_, k := must2(ed25519.GenerateKey(rand.Reader))
		return k
	})
	hsKey = sync.OnceValue(func() []byte {
		b := make([]byte, 32)
		rand.Read(b)
		return b
	})
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func signers() []signer {
	return []signer{
		{HS256, jwt.SigningMethodHS256, hsKey(), hsKey()},
		{RS256, jwt.SigningMethodRS256, rsaKey(), rsaKey().Public()},
		{ES256, jwt.SigningMethodES256, ecKey(), ecKey().Public()},
		{EdDSA, jwt.SigningMethodEdDSA, edKey(), edKey().Public()},
	}
}

func signerFor(alg string) signer {
	for _, s := range signers() {
		if s.alg == alg {
			return s
		}
	}
	panic("no signer for " + alg)
}

// claimsAt returns valid claims for a token issued at now.
func claimsAt(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"sub":  "alice",
		"iss":  "https://issuer.example",
		"aud":  "bouncer",
		"plan": "pro",
		"iat":  now.Unix(),
		"exp":  now.Add(time.Hour).Unix(),
	}
}

// sign returns claims signed by s, with kid in the header unless "".
func sign(t testing.TB, s signer, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(s.method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	out, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	return out
}

// handBuilt returns a token of the given header and claims with sig as
// its signature, for tokens no library would sign.
func handBuilt(t *testing.T, header, claims map[string]any, sig []byte) string {
	t.Helper()
	return segment(t, header) + "." + segment(t, claims) + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// segment returns v as a token's segment: base64url of its JSON.
func segment(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func pemPublic(t testing.TB, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// keyFile writes s's verifying key as a File source would hold it.
func keyFile(t testing.TB, s signer) string {
	t.Helper()
	if s.alg == HS256 {
		return writeFile(t, "secret", s.public.([]byte))
	}
	return writeFile(t, "key.pem", pemPublic(t, s.public))
}

// jwkOf returns the JWK of s's verifying key.
func jwkOf(t *testing.T, s signer, kid string) map[string]any {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	k := map[string]any{"kid": kid, "use": "sig", "alg": s.alg}
	switch pub := s.public.(type) {
	case []byte:
		k["kty"], k["k"] = "oct", b64(pub)
	case *rsa.PublicKey:
		k["kty"], k["n"], k["e"] = "RSA", b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		p, err := pub.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		k["kty"], k["crv"], k["x"], k["y"] = "EC", "P-256", b64(p[1:33]), b64(p[33:])
	case ed25519.PublicKey:
		k["kty"], k["crv"], k["x"] = "OKP", "Ed25519", b64(pub)
	default:
		t.Fatalf("no JWK for %T", pub)
	}
	return k
}

func jwks(t *testing.T, keys ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A jwksServer serves a JWK Set over TLS and counts the fetches.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	body []byte
	code int
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body, code: http.StatusOK}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		body, code := s.body, s.code
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(code)
		w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(code int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.code, s.body = code, body
}

// newJWT returns a JWT for c that Cleanup closes.
func newJWT(t *testing.T, c JWTConfig, o Options) *JWT {
	t.Helper()
	j, err := NewJWT(c, o)
	if err != nil {
		t.Fatalf("NewJWT: %v", err)
	}
	t.Cleanup(j.Close)
	return j
}

func bearer(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}
