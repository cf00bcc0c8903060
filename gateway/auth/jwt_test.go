package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestJWTValid verifies a token of every algorithm from every kind of
// source.
func TestJWTValid(t *testing.T) {
	for _, s := range signers() {
		for _, from := range []string{"File", "JWKSFile", "JWKSURL"} {
			if from == "JWKSURL" && s.alg == HS256 {
				continue // a published secret is none: TestJWKSParse
			}
			t.Run(s.alg+"/"+from, func(t *testing.T) {
				clk := newClock()
				opts := Options{Now: clk.Now}
				var src KeySource
				switch from {
				case "File":
					src = KeySource{File: keyFile(t, s), KeyID: "k1", Algorithms: []string{s.alg}}
				case "JWKSFile":
					src = KeySource{JWKSFile: writeFile(t, "jwks.json", jwks(t, jwkOf(t, s, "k1")))}
				case "JWKSURL":
					srv := newJWKSServer(t, jwks(t, jwkOf(t, s, "k1")))
					src = KeySource{JWKSURL: srv.URL + "/jwks.json"}
					opts.HTTPClient = srv.Client()
				}
				j := newJWT(t, JWTConfig{
					Name:      "test",
					Keys:      []KeySource{src},
					Issuer:    "https://issuer.example",
					Audience:  []string{"other", "bouncer"},
					PlanClaim: "plan",
				}, opts)
				id, err := j.Authenticate(bearer(sign(t, s, "k1", claimsAt(clk.Now()))))
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if id.Subject != "alice" || id.Plan != "pro" || id.Method != MethodJWT || id.KeyID != "k1" {
					t.Errorf("got %+v, want alice, pro, jwt, k1", id)
				}
				if got := id.Claims["iss"]; got != "https://issuer.example" {
					t.Errorf("got claim iss %v, want https://issuer.example", got)
				}
			})
		}
	}
}

// TestJWTRefused sends each attack, and each malformed request, to one
// authenticator holding an RSA key (kid "rsa"), an EC key (kid "ec") and
// an HMAC secret (kid "hs"), and checks that each is refused for the
// reason it was built to be.
func TestJWTRefused(t *testing.T) {
	clk := newClock()
	rs, es, hs := signerFor(RS256), signerFor(ES256), signerFor(HS256)
	rsaPEM := pemPublic(t, rs.public)
	j := newJWT(t, JWTConfig{
		Keys: []KeySource{
			{File: writeFile(t, "rsa.pem", rsaPEM), KeyID: "rsa", Algorithms: []string{RS256}},
			{File: keyFile(t, es), KeyID: "ec", Algorithms: []string{ES256}},
			{File: keyFile(t, hs), KeyID: "hs", Algorithms: []string{HS256}},
		},
		Issuer:    "https://issuer.example",
		Audience:  []string{"bouncer"},
		PlanClaim: "plan",
	}, Options{Now: clk.Now})

	now := clk.Now()
	with := func(changes map[string]any) jwt.MapClaims {
		c := claimsAt(now)
		for k, v := range changes {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	valid := sign(t, rs, "rsa", claimsAt(now))
	parts := strings.Split(valid, ".")

	tests := []struct {
		name  string
		req   func() *http.Request
		token string // sent as a Bearer token when req is nil
		why   string // in the error
	}{
		{name: "alg none", token: handBuilt(t, map[string]any{"alg": "none", "typ": "JWT", "kid": "rsa"}, claimsAt(now), nil), why: "signing method none is invalid"},
		{name: "alg none without kid", token: handBuilt(t, map[string]any{"alg": "none"}, claimsAt(now), nil), why: "signing method none is invalid"},
		// The RSA key's PEM, which is public, as an HMAC secret.
		{name: "HS256 signed with the RSA public key", token: sign(t, signer{method: jwt.SigningMethodHS256, key: rsaPEM}, "rsa", claimsAt(now)), why: `alg HS256 is not allowed for kid "rsa"`},
		{name: "HS256 signed with the RSA public key, no kid", token: sign(t, signer{method: jwt.SigningMethodHS256, key: rsaPEM}, "", claimsAt(now)), why: `no key for kid ""`},
		{name: "RS384 with the RSA key", token: sign(t, signer{method: jwt.SigningMethodRS384, key: rs.key}, "rsa", claimsAt(now)), why: "signing method RS384 is invalid"},
		{name: "PS256 with the RSA key", token: sign(t, signer{method: jwt.SigningMethodPS256, key: rs.key}, "rsa", claimsAt(now)), why: "signing method PS256 is invalid"},
		{name: "ES256 under the RSA key's kid", token: sign(t, es, "rsa", claimsAt(now)), why: `alg ES256 is not allowed for kid "rsa"`},
		{name: "RS256 under the HMAC key's kid", token: sign(t, rs, "hs", claimsAt(now)), why: `alg RS256 is not allowed for kid "hs"`},
		{name: "signed by another RSA key", token: sign(t, signer{method: jwt.SigningMethodRS256, key: must(rsa.GenerateKey(rand.Reader, 2048))}, "rsa", claimsAt(now)), why: "verification error"},
		{name: "claims changed after signing", token: parts[0] + "." + segment(t, with(map[string]any{"sub": "mallory"})) + "." + parts[2], why: "verification error"},
		{name: "signature stripped", token: parts[0] + "." + parts[1] + ".", why: "signature is invalid"},
		{name: "expired", token: sign(t, rs, "rsa", with(map[string]any{"exp": now.Add(-31 * time.Second).Unix()})), why: "token is expired"},
		{name: "no exp", token: sign(t, rs, "rsa", with(map[string]any{"exp": nil})), why: "exp claim is required"},
		{name: "exp not a number", token: sign(t, rs, "rsa", with(map[string]any{"exp": "tomorrow"})), why: "exp is invalid"},
		{name: "nbf in the future", token: sign(t, rs, "rsa", with(map[string]any{"nbf": now.Add(31 * time.Second).Unix()})), why: "token is not valid yet"},
		{name: "iat in the future", token: sign(t, rs, "rsa", with(map[string]any{"iat": now.Add(31 * time.Second).Unix()})), why: "token used before issued"},
		{name: "wrong issuer", token: sign(t, rs, "rsa", with(map[string]any{"iss": "https://evil.example"})), why: "token has invalid issuer"},
		{name: "no issuer", token: sign(t, rs, "rsa", with(map[string]any{"iss": nil})), why: "iss claim is required"},
		{name: "wrong audience", token: sign(t, rs, "rsa", with(map[string]any{"aud": []string{"billing", "admin"}})), why: "token has invalid audience"},
		{name: "no audience", token: sign(t, rs, "rsa", with(map[string]any{"aud": nil})), why: "aud claim is required"},
		{name: "unknown kid", token: sign(t, rs, "other", claimsAt(now)), why: `no key for kid "other"`},
		{name: "kid not a string", token: handBuilt(t, map[string]any{"alg": "RS256", "kid": 7}, claimsAt(now), []byte("sig")), why: "kid is not a string"},
		{name: "crit header", token: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claimsAt(now))
			tok.Header["kid"], tok.Header["crit"], tok.Header["exp"] = "rsa", []string{"exp"}, 0
			return must(tok.SignedString(rs.key))
		}(), why: `a "crit" header`},
		{name: "empty subject", token: sign(t, rs, "rsa", with(map[string]any{"sub": ""})), why: `claim "sub" is not a non-empty string`},
		{name: "no subject", token: sign(t, rs, "rsa", with(map[string]any{"sub": nil})), why: `claim "sub" is not a non-empty string`},
		{name: "subject not a string", token: sign(t, rs, "rsa", with(map[string]any{"sub": 42})), why: `claim "sub" is not a non-empty string`},
		{name: "subject with a newline", token: sign(t, rs, "rsa", with(map[string]any{"sub": "alice\r\nX-Bouncer-Plan: enterprise"})), why: "control characters"},
		{name: "plan not a string", token: sign(t, rs, "rsa", with(map[string]any{"plan": []string{"pro"}})), why: `claim "plan" is not a string`},
		{name: "garbage", token: "garbage", why: "token is malformed"},
		{name: "garbage with dots", token: "a.b.c", why: "token is malformed"},
		{name: "header not JSON", token: base64.RawURLEncoding.EncodeToString([]byte("{alg")) + "." + parts[1] + "." + parts[2], why: "token is malformed"},
		{name: "too long", token: valid + strings.Repeat("A", 8192), why: "over MaxTokenBytes (8192)"},
		{name: "missing header", req: func() *http.Request { return httptest.NewRequest("GET", "/", nil) }, why: "no Authorization header"},
		{name: "empty bearer", token: "", why: "empty token"},
		{name: "Basic scheme", req: func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.SetBasicAuth("alice", "secret")
			return r
		}, why: "not a Bearer token"},
		{name: "token without scheme", req: func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Authorization", valid)
			return r
		}, why: "not a Bearer token"},
		{name: "two Authorization headers", req: func() *http.Request {
			r := bearer(valid)
			r.Header.Add("Authorization", "Bearer "+valid)
			return r
		}, why: "2 Authorization headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bearer(tt.token)
			if tt.req != nil {
				r = tt.req()
			}
			id, err := j.Authenticate(r)
			if !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("got %+v, %v; want an error wrapping ErrUnauthenticated", id, err)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("got error %q, want it to say %q", err, tt.why)
			}
			if id.Subject != "" || id.Claims != nil {
				t.Errorf("got identity %+v with the error, want the zero Identity", id)
			}
		})
	}

	// The jwt package's error is wrapped too.
	if _, err := j.Authenticate(bearer(sign(t, rs, "rsa", with(map[string]any{"exp": now.Add(-time.Hour).Unix()})))); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("an expired token: got %v, want it to wrap jwt.ErrTokenExpired", err)
	}

	// The same authenticator accepts what is valid, so the refusals
	// above are the attacks' doing.
	for _, tok := range []string{valid, sign(t, es, "ec", claimsAt(now)), sign(t, hs, "hs", claimsAt(now))} {
		if _, err := j.Authenticate(bearer(tok)); err != nil {
			t.Errorf("a valid token: %v", err)
		}
	}
}

// TestJWTSkew checks exp, nbf and iat at the edges of the allowed skew.
func TestJWTSkew(t *testing.T) {
	clk := newClock()
	rs := signerFor(RS256)
	file := keyFile(t, rs)
	now := clk.Now()
	tests := []struct {
		skew   time.Duration
		claim  string
		offset time.Duration // from now
		ok     bool
	}{
		{0, "exp", -29 * time.Second, true}, // default skew: 30s
		{0, "exp", -31 * time.Second, false},
		{0, "nbf", 29 * time.Second, true},
		{0, "nbf", 31 * time.Second, false},
		{0, "iat", 29 * time.Second, true},
		{0, "iat", 31 * time.Second, false},
		{time.Second, "exp", -10 * time.Second, false},
		{time.Second, "exp", 10 * time.Second, true},
		{time.Second, "nbf", 2 * time.Second, false},
		{5 * time.Minute, "exp", -4 * time.Minute, true},
		{5 * time.Minute, "exp", -6 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("skew=%v/%s%+v", tt.skew, tt.claim, tt.offset), func(t *testing.T) {
			j := newJWT(t, JWTConfig{Skew: tt.skew, Keys: []KeySource{{File: file, Algorithms: []string{RS256}}}}, Options{Now: clk.Now})
			c := claimsAt(now)
			c[tt.claim] = now.Add(tt.offset).Unix()
			_, err := j.Authenticate(bearer(sign(t, rs, "", c)))
			if got := err == nil; got != tt.ok {
				t.Errorf("got accepted %v (%v), want %v", got, err, tt.ok)
			}
		})
	}
}

// TestJWTMaxTokenBytes checks that a token over the bound is refused
// before any key is looked up, and one at the bound is not.
func TestJWTMaxTokenBytes(t *testing.T) {
	clk := newClock()
	rs := signerFor(RS256)
	j := newJWT(t, JWTConfig{MaxTokenBytes: 1000, Keys: []KeySource{{File: keyFile(t, rs), Algorithms: []string{RS256}}}}, Options{Now: clk.Now})
	valid := sign(t, rs, "", claimsAt(clk.Now()))
	if len(valid) > 1000 {
		t.Fatalf("a valid token of %d bytes: the test needs one of at most 1000", len(valid))
	}
	tests := []struct {
		token   string
		lookups int64
		ok      bool
	}{
		{valid, 1, true},
		{valid + strings.Repeat("A", 1000-len(valid)), 1, false}, // at the bound: parsed, and its signature fails
		{valid + strings.Repeat("A", 1001-len(valid)), 0, false},
		{strings.Repeat("A", 1<<20), 0, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("bytes=%d", len(tt.token)), func(t *testing.T) {
			before := j.lookups.Load()
			_, err := j.Authenticate(bearer(tt.token))
			if got := err == nil; got != tt.ok {
				t.Errorf("got accepted %v (%v), want %v", got, err, tt.ok)
			}
			if got := j.lookups.Load() - before; got != tt.lookups {
				t.Errorf("got %d key lookups, want %d", got, tt.lookups)
			}
		})
	}
}

// TestJWTHeader reads the token from the configured header.
func TestJWTHeader(t *testing.T) {
	clk := newClock()
	es := signerFor(ES256)
	src := []KeySource{{File: keyFile(t, es), Algorithms: []string{ES256}}}
	tok := sign(t, es, "", claimsAt(clk.Now()))
	tests := []struct {
		name   string
		header string // JWTConfig.Header
		set    string // the request's header
		value  string
		ok     bool
	}{
		{"bearer", "", "Authorization", "Bearer " + tok, true},
		{"bearer in lower case", "", "Authorization", "bearer " + tok, true},
		{"bearer, explicit header", "authorization", "Authorization", "BEARER " + tok, true},
		{"raw header", "X-Token", "x-token", tok, true},
		{"raw header with a scheme", "X-Token", "X-Token", "Bearer " + tok, false},
		{"raw header, token in Authorization", "X-Token", "Authorization", "Bearer " + tok, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJWT(t, JWTConfig{Header: tt.header, Keys: src}, Options{Now: clk.Now})
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set(tt.set, tt.value)
			_, err := j.Authenticate(r)
			if got := err == nil; got != tt.ok {
				t.Errorf("got accepted %v (%v), want %v", got, err, tt.ok)
			}
		})
	}
}

// TestJWTKeyIDs checks which tokens a key without a KeyID verifies.
func TestJWTKeyIDs(t *testing.T) {
	clk := newClock()
	rs, ed := signerFor(RS256), signerFor(EdDSA)
	rsFile, edFile := keyFile(t, rs), keyFile(t, ed)
	c := claimsAt(clk.Now())
	only := newJWT(t, JWTConfig{Keys: []KeySource{{File: rsFile, Algorithms: []string{RS256}}}}, Options{Now: clk.Now})
	two := newJWT(t, JWTConfig{Keys: []KeySource{
		{File: rsFile, Algorithms: []string{RS256}},
		{File: edFile, KeyID: "ed", Algorithms: []string{EdDSA}},
	}}, Options{Now: clk.Now})
	tests := []struct {
		name  string
		j     *JWT
		token string
		ok    bool
	}{
		{"only key, no kid", only, sign(t, rs, "", c), true},
		{"only key, any kid", only, sign(t, rs, "whatever", c), true},
		{"only key, HS256 with its PEM as the secret", only, sign(t, signer{method: jwt.SigningMethodHS256, key: pemPublic(t, rs.public)}, "", c), false},
		{"one of two, no kid", two, sign(t, rs, "", c), true},
		{"one of two, a kid", two, sign(t, rs, "whatever", c), false},
		{"the other, its kid", two, sign(t, ed, "ed", c), true},
		{"the other, no kid", two, sign(t, ed, "", c), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.j.Authenticate(bearer(tt.token))
			if got := err == nil; got != tt.ok {
				t.Errorf("got accepted %v (%v), want %v", got, err, tt.ok)
			}
			if err == nil && id.KeyID != tokenKid(tt.token) {
				t.Errorf("got KeyID %q, want the token's %q", id.KeyID, tokenKid(tt.token))
			}
		})
	}
}

func tokenKid(tok string) string {
	t, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
	if err != nil {
		panic(err)
	}
	kid, _ := t.Header["kid"].(string)
	return kid
}

// TestJWTConcurrent authenticates from many goroutines at once (for the
// race detector).
func TestJWTConcurrent(t *testing.T) {
	clk := newClock()
	ed := signerFor(EdDSA)
	srv := newJWKSServer(t, jwks(t, jwkOf(t, ed, "a")))
	j := newJWT(t, JWTConfig{Keys: []KeySource{{JWKSURL: srv.URL}}}, Options{Now: clk.Now, HTTPClient: srv.Client()})
	tok := sign(t, ed, "a", claimsAt(clk.Now()))
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			if _, err := j.Authenticate(bearer(tok)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Authenticate: %v", err)
	}
	if got := srv.hits.Load(); got != 1 {
		t.Errorf("got %d fetches, want 1", got)
	}
}

// TestJWTVerifiedTokens checks what a token presented again skips and
// what it does not: it is not verified again (no key lookup), but its
// times are checked every time, a token that failed is verified every
// time, and each caller gets claims of its own.
func TestJWTVerifiedTokens(t *testing.T) {
	clk := newClock()
	rs := signerFor(RS256)
	j := newJWT(t, JWTConfig{Keys: []KeySource{{File: keyFile(t, rs), Algorithms: []string{RS256}}}}, Options{Now: clk.Now})
	c := claimsAt(clk.Now())
	c["exp"] = clk.Now().Add(time.Minute).Unix()
	tok := sign(t, rs, "", c)
	for i := range 3 {
		before := j.lookups.Load()
		id, err := j.Authenticate(bearer(tok))
		if err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
		want := int64(0)
		if i == 0 {
			want = 1
		}
		if got := j.lookups.Load() - before; got != want {
			t.Errorf("use %d: %d key lookups, want %d", i, got, want)
		}
		if id.Subject != "alice" || id.Claims["sub"] != "alice" {
			t.Errorf("use %d: %+v, want alice with her claims", i, id)
		}
		id.Claims["sub"] = "mallory" // a caller's copy
	}
	// Past exp and the skew, the remembered token is refused as expired.
	clk.Advance(time.Minute + defaultSkew)
	if _, err := j.Authenticate(bearer(tok)); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("after exp and the skew: %v, want ErrTokenExpired", err)
	}

	// A token not valid yet is refused, and not remembered: it is
	// accepted once its time comes.
	c = claimsAt(clk.Now())
	c["nbf"] = clk.Now().Add(time.Hour).Unix()
	early := sign(t, rs, "", c)
	if _, err := j.Authenticate(bearer(early)); !errors.Is(err, jwt.ErrTokenNotValidYet) {
		t.Fatalf("before nbf: %v, want ErrTokenNotValidYet", err)
	}
	clk.Advance(time.Hour)
	if _, err := j.Authenticate(bearer(early)); err != nil {
		t.Fatalf("after nbf: %v", err)
	}

	// A token that failed is verified every time it comes.
	forged := tok[:len(tok)-4] + "AAAA"
	before := j.lookups.Load()
	for range 3 {
		if _, err := j.Authenticate(bearer(forged)); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("a forged token: %v, want ErrUnauthenticated", err)
		}
	}
	if got := j.lookups.Load() - before; got != 3 {
		t.Errorf("a forged token three times: %d key lookups, want 3", got)
	}

}
