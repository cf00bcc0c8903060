package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestJWKSUnknownKidFlood sends floods of tokens with made-up kids and
// counts the fetches they cause: none within MinRefresh of the last
// fetch, and one for a whole flood after it.
func TestJWKSUnknownKidFlood(t *testing.T) {
	clk := newClock()
	ed := signerFor(EdDSA)
	srv := newJWKSServer(t, jwks(t, jwkOf(t, ed, "a")))
	j := newJWT(t, JWTConfig{Keys: []KeySource{{JWKSURL: srv.URL, MinRefresh: time.Minute}}},
		Options{Now: clk.Now, HTTPClient: srv.Client()})

	if _, err := j.Authenticate(bearer(sign(t, ed, "a", claimsAt(clk.Now())))); err != nil {
		t.Fatalf("a valid token: %v", err)
	}
	flood := func() {
		t.Helper()
		var wg sync.WaitGroup
		for i := range 100 {
			tok := sign(t, ed, fmt.Sprintf("random-%d-%d", clk.Now().Unix(), i), claimsAt(clk.Now()))
			wg.Go(func() {
				if _, err := j.Authenticate(bearer(tok)); !errors.Is(err, ErrUnauthenticated) {
					t.Errorf("a made-up kid: got %v, want ErrUnauthenticated", err)
				}
			})
		}
		wg.Wait()
	}
	steps := []struct {
		advance time.Duration
		hits    int64 // fetches so far
	}{
		{0, 1}, // the first fetch was less than MinRefresh ago
		{59 * time.Second, 1},
		{time.Second, 2}, // MinRefresh since the first: one fetch for the flood
		{0, 2},
		{30 * time.Second, 2},
		{30 * time.Second, 3},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		flood()
		if got := srv.hits.Load(); got != s.hits {
			t.Errorf("step %d (+%v): got %d fetches, want %d", i, s.advance, got, s.hits)
		}
	}
	// The known key works throughout.
	if _, err := j.Authenticate(bearer(sign(t, ed, "a", claimsAt(clk.Now())))); err != nil {
		t.Errorf("a valid token after the floods: %v", err)
	}
}

// TestJWKSRotation rotates the served keys: a token with the new kid
// works after one fetch, and the retired key stops verifying.
func TestJWKSRotation(t *testing.T) {
	clk := newClock()
	rs, es := signerFor(RS256), signerFor(ES256)
	srv := newJWKSServer(t, jwks(t, jwkOf(t, rs, "2030-01")))
	j := newJWT(t, JWTConfig{Keys: []KeySource{{JWKSURL: srv.URL}}}, Options{Now: clk.Now, HTTPClient: srv.Client()})
	oldTok := sign(t, rs, "2030-01", claimsAt(clk.Now()))
	if _, err := j.Authenticate(bearer(oldTok)); err != nil {
		t.Fatalf("a token with the first key: %v", err)
	}

	srv.serve(http.StatusOK, jwks(t, jwkOf(t, es, "2030-02")))
	clk.Advance(defaultMinRefresh)
	newTok := sign(t, es, "2030-02", claimsAt(clk.Now()))
	id, err := j.Authenticate(bearer(newTok))
	if err != nil {
		t.Fatalf("a token with the new key: %v", err)
	}
	if id.KeyID != "2030-02" {
		t.Errorf("got KeyID %q, want 2030-02", id.KeyID)
	}
	if got := srv.hits.Load(); got != 2 {
		t.Errorf("got %d fetches, want 2", got)
	}
	if _, err := j.Authenticate(bearer(oldTok)); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a token with the retired key: got %v, want ErrUnauthenticated", err)
	}
	if got := srv.hits.Load(); got != 2 {
		t.Errorf("the retired kid, within MinRefresh: got %d fetches, want still 2", got)
	}
}

// TestJWKSRefreshEvery checks the periodic fetch, on synctest's clock.
// The server runs outside the bubble; its client keeps no idle
// connection, whose reading goroutine would keep the bubble from ever
// being idle.
func TestJWKSRefreshEvery(t *testing.T) {
	ed := signerFor(EdDSA)
	srv := newJWKSServer(t, jwks(t, jwkOf(t, ed, "a")))
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	client := &http.Client{Transport: tr}
	synctest.Test(t, func(t *testing.T) {
		j, err := NewJWT(JWTConfig{Keys: []KeySource{{JWKSURL: srv.URL, RefreshEvery: time.Hour}}}, Options{HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		steps := []struct {
			sleep time.Duration
			hits  int64
		}{
			{0, 1},
			{59 * time.Minute, 1},
			{time.Minute, 2},
			{time.Hour, 3},
		}
		for i, s := range steps {
			time.Sleep(s.sleep)
			synctest.Wait()
			if got := srv.hits.Load(); got != s.hits {
				t.Errorf("step %d (+%v): got %d fetches, want %d", i, s.sleep, got, s.hits)
			}
		}
		// A failed fetch is tried again after MinRefresh, and the keys
		// fetched before keep working meanwhile.
		srv.serve(http.StatusInternalServerError, nil)
		time.Sleep(time.Hour)
		synctest.Wait()
		time.Sleep(defaultMinRefresh)
		synctest.Wait()
		if got := srv.hits.Load(); got != 5 {
			t.Errorf("after a failure: got %d fetches, want 5", got)
		}
		if _, err := j.Authenticate(bearer(sign(t, ed, "a", claimsAt(time.Now())))); err != nil {
			t.Errorf("a token while the server fails: %v", err)
		}
	})
}

// TestJWKSFetchFailure starts with a server that fails: tokens are
// refused and the failure is logged, and once the server serves, the
// first token after MinRefresh gets the keys.
func TestJWKSFetchFailure(t *testing.T) {
	clk := newClock()
	es := signerFor(ES256)
	srv := newJWKSServer(t, nil)
	srv.serve(http.StatusServiceUnavailable, []byte("down"))
	var logs syncBuffer
	j := newJWT(t, JWTConfig{Name: "idp", Keys: []KeySource{{JWKSURL: srv.URL}}},
		Options{Now: clk.Now, HTTPClient: srv.Client(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	tok := sign(t, es, "k", claimsAt(clk.Now()))
	if _, err := j.Authenticate(bearer(tok)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("with no keys fetched: got %v, want ErrUnauthenticated", err)
	}
	srv.serve(http.StatusOK, jwks(t, jwkOf(t, es, "k")))
	if _, err := j.Authenticate(bearer(tok)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("within MinRefresh of the failure: got %v, want ErrUnauthenticated", err)
	}
	clk.Advance(defaultMinRefresh)
	if _, err := j.Authenticate(bearer(tok)); err != nil {
		t.Fatalf("after MinRefresh: %v", err)
	}
	if got := srv.hits.Load(); got != 2 {
		t.Errorf("got %d fetches, want 2", got)
	}
	j.Close()
	if got := logs.String(); !strings.Contains(got, "fetching a JWK Set failed") || !strings.Contains(got, "503") || !strings.Contains(got, `authenticator="jwt \"idp\""`) {
		t.Errorf("got logs %q, want the failure with its status and the authenticator's name", got)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestJWKSWaitHonoursContext holds the first fetch: a token waits for it
// no longer than its request's context.
func TestJWKSWaitHonoursContext(t *testing.T) {
	clk := newClock()
	es := signerFor(ES256)
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Write(jwks(t, jwkOf(t, es, "k")))
	}))
	defer srv.Close()
	j := newJWT(t, JWTConfig{Keys: []KeySource{{JWKSURL: srv.URL}}}, Options{Now: clk.Now, HTTPClient: srv.Client()})
	tok := sign(t, es, "k", claimsAt(clk.Now()))

	ctx, cancel := context.WithCancel(context.Background())
	r := bearer(tok).WithContext(ctx)
	done := make(chan error)
	go func() {
		_, err := j.Authenticate(r)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want ErrUnauthenticated and context.Canceled", err)
	}
	close(release)
	if _, err := j.Authenticate(bearer(tok)); err != nil {
		t.Errorf("once the fetch ends: %v", err)
	}
}

// TestJWKSClose stops the refresher: afterwards the keys fetched still
// verify, and an unknown kid causes no fetch and no wait.
func TestJWKSClose(t *testing.T) {
	clk := newClock()
	ed := signerFor(EdDSA)
	srv := newJWKSServer(t, jwks(t, jwkOf(t, ed, "a")))
	j, err := NewJWT(JWTConfig{Keys: []KeySource{{JWKSURL: srv.URL}}}, Options{Now: clk.Now, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Authenticate(bearer(sign(t, ed, "a", claimsAt(clk.Now())))); err != nil {
		t.Fatalf("before Close: %v", err)
	}
	j.Close()
	j.Close()
	clk.Advance(time.Hour)
	if _, err := j.Authenticate(bearer(sign(t, ed, "a", claimsAt(clk.Now())))); err != nil {
		t.Errorf("after Close: %v", err)
	}
	if _, err := j.Authenticate(bearer(sign(t, ed, "b", claimsAt(clk.Now())))); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("an unknown kid after Close: got %v, want ErrUnauthenticated", err)
	}
	if got := srv.hits.Load(); got != 1 {
		t.Errorf("got %d fetches, want 1", got)
	}
}

// TestJWKSServed checks what a set served from a URL must be to be used.
func TestJWKSServed(t *testing.T) {
	clk := newClock()
	ed := signerFor(EdDSA)
	good := jwks(t, jwkOf(t, ed, "a"))
	tests := []struct {
		name    string
		handler http.HandlerFunc
		ok      bool
	}{
		{"ok", func(w http.ResponseWriter, r *http.Request) { w.Write(good) }, true},
		{"not found", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, false},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) }, false},
		{"no keys member", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"kys":[]}`)) }, false},
		{"over 1 MiB", func(w http.ResponseWriter, r *http.Request) {
			w.Write(bytes.Replace(good, []byte(`{"keys":`), []byte(`{"pad":"`+strings.Repeat("x", maxJWKSBytes)+`","keys":`), 1))
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewTLSServer(tt.handler)
			defer srv.Close()
			j := newJWT(t, JWTConfig{Keys: []KeySource{{JWKSURL: srv.URL}}}, Options{Now: clk.Now, HTTPClient: srv.Client()})
			_, err := j.Authenticate(bearer(sign(t, ed, "a", claimsAt(clk.Now()))))
			if got := err == nil; got != tt.ok {
				t.Errorf("got accepted %v (%v), want %v", got, err, tt.ok)
			}
			j.Close()
		})
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://issuer.example/.well-known/jwks.json", true},
		{"https://127.0.0.1:8443/jwks", true},
		{"http://127.0.0.1:8080/jwks", true},
		{"http://127.1.2.3/jwks", true},
		{"http://[::1]:8080/jwks", true},
		{"http://localhost:8080/jwks", true},
		{"http://issuer.example/jwks", false},
		{"http://10.0.0.1/jwks", false},
		{"http://localhost.issuer.example/jwks", false},
		{"ftp://issuer.example/jwks", false},
		{"file:///etc/jwks.json", false},
		{"https:///jwks", false},
		{"jwks.json", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkURL(u); (err == nil) != tt.ok {
				t.Errorf("got %v, want allowed %v", err, tt.ok)
			}
		})
	}
}

// TestJWKSParse checks which keys of a set are used.
func TestJWKSParse(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	rs, es, ed, hs := signerFor(RS256), signerFor(ES256), signerFor(EdDSA), signerFor(HS256)
	edit := func(k map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for n, v := range k {
			out[n] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(out, kv[i].(string))
			} else {
				out[kv[i].(string)] = kv[i+1]
			}
		}
		return out
	}
	small := must(rsa.GenerateKey(rand.Reader, 1024))
	p384 := must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader))
	tests := []struct {
		name     string
		key      map[string]any
		restrict []string
		secrets  bool
		alg      string // "" if the key is left out
		why      string
	}{
		{name: "RSA", key: jwkOf(t, rs, "k"), alg: RS256},
		{name: "RSA without alg or use", key: edit(jwkOf(t, rs, "k"), "alg", nil, "use", nil), alg: RS256},
		{name: "RSA padded base64", key: edit(jwkOf(t, rs, "k"), "e", "AQAB=="), alg: RS256},
		{name: "RSA for encryption", key: edit(jwkOf(t, rs, "k"), "use", "enc"), why: `use "enc"`},
		{name: "RSA with alg RS384", key: edit(jwkOf(t, rs, "k"), "alg", "RS384"), why: `alg "RS384"`},
		{name: "RSA with alg HS256", key: edit(jwkOf(t, rs, "k"), "alg", "HS256"), why: `alg "HS256"`},
		{name: "RSA of 1024 bits", key: edit(jwkOf(t, rs, "k"), "n", b64(small.N.Bytes())), why: "1024 bits"},
		{name: "RSA with an even exponent", key: edit(jwkOf(t, rs, "k"), "e", b64([]byte{1, 0, 0})), why: "exponent"},
		{name: "RSA without n", key: edit(jwkOf(t, rs, "k"), "n", nil), why: `no "n"`},
		{name: "RSA with bad base64", key: edit(jwkOf(t, rs, "k"), "n", "***"), why: "illegal base64"},
		{name: "EC", key: jwkOf(t, es, "k"), alg: ES256},
		{name: "EC restricted to RS256", key: jwkOf(t, es, "k"), restrict: []string{RS256, EdDSA}, why: "not among the source's Algorithms"},
		{name: "EC restricted to ES256", key: jwkOf(t, es, "k"), restrict: []string{ES256, EdDSA}, alg: ES256},
		{name: "EC on P-384", key: edit(jwkOf(t, es, "k"), "crv", "P-384", "x", b64(must(p384.PublicKey.Bytes())[1:49]), "y", b64(must(p384.PublicKey.Bytes())[49:])), why: `curve "P-384"`},
		{name: "EC off the curve", key: edit(jwkOf(t, es, "k"), "y", b64(make([]byte, 32))), why: "not on curve"},
		{name: "EC short coordinate", key: edit(jwkOf(t, es, "k"), "x", b64(make([]byte, 31))), why: "32 bytes"},
		{name: "Ed25519", key: jwkOf(t, ed, "k"), alg: EdDSA},
		{name: "Ed25519 short", key: edit(jwkOf(t, ed, "k"), "x", b64(make([]byte, 31))), why: "31 bytes"},
		{name: "X25519", key: edit(jwkOf(t, ed, "k"), "crv", "X25519"), why: `curve "X25519"`},
		{name: "oct from a URL", key: jwkOf(t, hs, "k"), why: "no secret"},
		{name: "oct from a file", key: jwkOf(t, hs, "k"), secrets: true, alg: HS256},
		{name: "oct too short", key: edit(jwkOf(t, hs, "k"), "k", b64(make([]byte, 16))), secrets: true, why: "16 bytes"},
		{name: "unknown kty", key: edit(jwkOf(t, rs, "k"), "kty", "DSA"), why: `kty "DSA"`},
		{name: "kid not a string", key: edit(jwkOf(t, rs, "k"), "kid", 7), why: "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each set also holds a usable key, so that the one under
			// test being left out is not an error.
			keys, skipped, err := parseJWKS(jwks(t, tt.key, jwkOf(t, ed, "other")), tt.restrict, tt.secrets)
			if err != nil {
				t.Fatalf("parseJWKS: %v", err)
			}
			var got string
			for _, k := range keys {
				if k.id == "k" {
					got = k.alg
				}
			}
			if got != tt.alg {
				t.Errorf("got alg %q, want %q (skipped: %q)", got, tt.alg, skipped)
			}
			if tt.why != "" && (len(skipped) != 1 || !strings.Contains(skipped[0], tt.why)) {
				t.Errorf("got skipped %q, want one saying %q", skipped, tt.why)
			}
		})
	}
}

func TestJWKSParseErrors(t *testing.T) {
	tests := []struct {
		name, data, why string
	}{
		{"not JSON", "{", "not a JWK Set"},
		{"no keys", `{"kid":"a"}`, `no "keys"`},
		{"empty keys", `{"keys":[]}`, "no usable key among 0"},
		{"only unusable keys", `{"keys":[{"kty":"RSA","use":"enc"}]}`, `no usable key among 1: key 0 (kid ""): use "enc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseJWKS([]byte(tt.data), nil, true)
			if err == nil || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("got %v, want an error saying %q", err, tt.why)
			}
		})
	}
}
